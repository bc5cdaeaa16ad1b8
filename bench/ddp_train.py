#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A data-parallel PyTorch training job for `joule sweep` (one process per GPU, under torchrun).

ResNet-18 on a synthetic dataset of fixed size, so one epoch is the same work
for every GPU count: steps per epoch = dataset / (batch size per GPU x GPUs).
Rank 0 reports samples, steps and epochs to $JOULE_REPORT_FILE for joule.

  torchrun --nproc-per-node 2 bench/ddp_train.py --batch-size 128 --dataset 20480
"""
import argparse
import os

import torch
import torch.distributed as dist
import torchvision


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=128, help="per GPU")
    parser.add_argument("--dataset", type=int, default=20480, help="samples per epoch")
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()

    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("nccl")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    model = torchvision.models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch_size, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch_size,), device="cuda")
    steps = max(1, args.dataset // (args.batch_size * world))
    for _ in range(args.epochs):
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    if distributed:
        dist.barrier()
    if rank == 0 and os.environ.get("JOULE_REPORT_FILE"):
        with open(os.environ["JOULE_REPORT_FILE"], "a") as report:
            report.write(f"samples={steps * args.batch_size * world * args.epochs} steps={steps * args.epochs} "
                         f"epochs={args.epochs}\n")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
