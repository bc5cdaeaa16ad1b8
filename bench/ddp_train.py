#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A data-parallel PyTorch training job for `joule sweep` (one process per GPU, under torchrun).

By default ResNet-18 on a synthetic dataset of fixed size, so one epoch is the same work
for every GPU count: steps per epoch = dataset / (batch size per GPU x GPUs).
Rank 0 reports samples, steps and epochs to $JOULE_REPORT_FILE for joule.

  torchrun --nproc-per-node 2 bench/ddp_train.py --batch-size 128 --dataset 20480

For the scaling study (bench/scaling/): --model resnet50 or gpt (a GPT-style
Transformer in bench/gpt_model.py, the one bench/gpu_attribution_models.py
measures per layer; synthetic tokens), a fixed
number of --steps per run instead of a dataset (so a run is a fixed amount of
work: the same for every GPU count with --global-batch, strong scaling; growing
with the GPU count with --batch-size, weak scaling), and --global-batch, split
evenly over the ranks (WORLD_SIZE) because a sweep grid cannot derive one value
from another. --device cpu (or auto without CUDA) trains on the CPU with Gloo,
to try the job without GPUs. Without torchvision, ResNet-50 is built here (the
same layers and 25.6 M parameters; the run's printed line says which).

  torchrun --nproc-per-node 8 bench/ddp_train.py --model gpt --global-batch 64 --steps 150 --warmup-steps 20
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gpt_model import SmallGPT  # beside this file


class Bottleneck(torch.nn.Module):
    """torchvision's ResNet bottleneck (v1.5: the stride on the 3x3 convolution)."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        width, out = planes, planes * 4
        self.conv1 = torch.nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.conv2 = torch.nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(width)
        self.conv3 = torch.nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = torch.nn.BatchNorm2d(out)
        self.relu = torch.nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = torch.nn.Sequential(torch.nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                                  torch.nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


def builtin_resnet50(num_classes=1000):
    """ResNet-50 as torchvision builds it (same layers and parameter count, 25.6 M), for machines
    whose PyTorch comes without torchvision: nothing can be installed on some GPU machines."""
    layers, inplanes = [], 64
    for planes, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
            inplanes = planes * 4
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(3, 2, 1), *layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(2048, num_classes))


def resnet(args):
    """The ResNet asked for: torchvision's, or for resnet50 the one above where torchvision is
    missing (--resnet-impl auto) or asked for (builtin)."""
    if args.resnet_impl != "builtin":
        try:
            import torchvision
            return getattr(torchvision.models, args.model)(num_classes=1000), "torchvision"
        except ImportError:
            if args.resnet_impl == "torchvision" or args.model != "resnet50":
                raise
    if args.model != "resnet50":
        sys.exit(f"ddp_train.py: --resnet-impl builtin has resnet50 only, not {args.model}")
    return builtin_resnet50(), "builtin"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["resnet18", "resnet50", "gpt"], default="resnet18")
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument("--batch-size", type=int, default=None, help="per GPU (default 128)")
    batch.add_argument("--global-batch", type=int, default=None,
                       help="over all ranks: each takes global / WORLD_SIZE (must divide evenly)")
    parser.add_argument("--dataset", type=int, default=20480, help="samples per epoch (ignored with --steps)")
    parser.add_argument("--epochs", type=int, default=1, help="ignored with --steps")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run, warm-up included")
    parser.add_argument("--warmup-steps", type=int, default=0,
                        help="first steps left out of the printed steady throughput (still trained and counted)")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--image-size", type=int, default=224, help="resnet models")
    parser.add_argument("--resnet-impl", choices=["auto", "torchvision", "builtin"], default="auto",
                        help="auto: torchvision's, else (resnet50) the same network written here")
    parser.add_argument("--seq-len", type=int, default=1024, help="gpt")
    parser.add_argument("--layers", type=int, default=12, help="gpt")
    parser.add_argument("--width", type=int, default=768, help="gpt")
    parser.add_argument("--heads", type=int, default=12, help="gpt")
    parser.add_argument("--vocab", type=int, default=32768, help="gpt")
    return parser.parse_args()


def local_batch_of(args, world):
    if args.global_batch is None:
        return args.batch_size if args.batch_size is not None else 128
    if args.global_batch % world != 0:
        sys.exit(f"ddp_train.py: --global-batch {args.global_batch} does not split evenly over {world} ranks")
    return args.global_batch // world


def build(args, batch, device):
    """The model, optimizer, one synthetic batch (inputs, targets) and the loss."""
    if args.model == "gpt":
        model = SmallGPT(args.vocab, args.seq_len, args.width, args.heads, args.layers).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        tokens = torch.randint(0, args.vocab, (batch, args.seq_len + 1), device=device)
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        return model, opt, x, y, lambda out, target: F.cross_entropy(out.flatten(0, 1), target.flatten())
    model, args.resnet_from = resnet(args)
    model = model.to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, args.image_size, args.image_size, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    return model, opt, x, y, F.cross_entropy


def main():
    args = parse_args()
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    batch = local_batch_of(args, world)
    model, opt, x, y, loss_of = build(args, batch, device)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None)
    if args.steps is not None:
        steps, epochs = args.steps, None
    else:
        steps, epochs = max(1, args.dataset // (batch * world)) * args.epochs, args.epochs

    def sync():
        if cuda:
            torch.cuda.synchronize()

    start = time.monotonic()
    steady_start = start
    for step in range(steps):
        if step == args.warmup_steps:
            sync()
            steady_start = time.monotonic()
        opt.zero_grad(set_to_none=True)
        # bf16 on GPUs; plain fp32 on a CPU (a smoke run, where bf16 would only be slow).
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            loss = loss_of(model(x), y)
        loss.backward()
        opt.step()
    sync()
    end = time.monotonic()
    if distributed:
        dist.barrier()
    if rank == 0:
        samples = steps * batch * world
        steady_steps = steps - min(args.warmup_steps, steps)
        steady_s = end - steady_start
        rate = steady_steps * batch * world / steady_s if steady_steps and steady_s > 0 else float("nan")
        unit = f" ({rate * args.seq_len:.0f} tokens/s)" if args.model == "gpt" else f" (model from {args.resnet_from})"
        # For the log: the training loop alone, start-up (imports, NCCL, model build) excluded,
        # which joule's window over the whole command includes.
        print(f"ddp_train: model={args.model} ranks={world} local_batch={batch} global_batch={batch * world} "
              f"steps={steps} train_s={end - start:.2f} warmup_steps={args.warmup_steps} "
              f"steady_samples_per_s={rate:.1f}{unit}", flush=True)
        if os.environ.get("JOULE_REPORT_FILE"):
            with open(os.environ["JOULE_REPORT_FILE"], "a") as report:
                line = f"samples={samples} steps={steps}"
                report.write(line + (f" epochs={epochs}\n" if epochs is not None else "\n"))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
