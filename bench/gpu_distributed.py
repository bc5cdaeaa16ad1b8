#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A data-parallel job measured with joule.distributed, against each GPU's
NVML energy counter (read-only: no GPU setting is changed).

Every rank trains a stack of bf16 linear layers under DistributedDataParallel,
one GPU per rank where there are enough (ranks share GPUs where there are
not: e.g. two Gloo ranks on one GPU). Each window (idle, steady training,
on/off training) is a joule.distributed window; the node's first local rank
reads every GPU's energy counter right after the window's begin edge and
right before its end edge (both ranks synchronised and at a barrier there),
and rank 0 prints joule's per-GPU and total energy beside the counters'.

  torchrun --nproc-per-node 2 bench/gpu_distributed.py --backend nccl --out result.json
"""
import argparse
import json
import os
import time

import pynvml
import torch
import torch.distributed as dist

import joule.distributed


def counters_mj(handles):
    return [pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each training window")
    parser.add_argument("--out", help="write the windows' results here (JSON)")
    args = parser.parse_args()

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's indices = NVML's
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    gpu = local % torch.cuda.device_count()
    torch.cuda.set_device(gpu)

    width = 8192
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(6)]).cuda()
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(2048, width, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    # Steps per second, agreed by all ranks (DDP needs the same step count everywhere).
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start = time.monotonic()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    rate = torch.tensor([20.0 / (time.monotonic() - start)], device="cuda")
    dist.all_reduce(rate, op=dist.ReduceOp.MIN)
    steps = max(1, int(rate.item() * args.seconds))

    handles = []
    if local == 0:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(torch.cuda.device_count())]

    def train(n):
        for _ in range(n):
            step()

    def on_off(n):  # half a second of training, half a second idle, over the window
        per_burst = max(1, steps // int(2 * args.seconds))
        for _ in range(max(1, n // per_burst)):
            train(per_burst)
            torch.cuda.synchronize()
            time.sleep(0.5)

    windows = [("idle", lambda: time.sleep(args.seconds / 2)), ("steady", lambda: train(steps)),
               ("on-off", lambda: on_off(steps)), ("steady-2", lambda: train(steps))]
    monitor = joule.distributed.DistributedMonitor(timeout_s=120)
    results = []
    for name, work in windows:
        torch.cuda.synchronize()
        dist.barrier()
        with monitor.window(name) as w:
            before = counters_mj(handles)
            t0 = time.monotonic()
            work()
            torch.cuda.synchronize()
            dist.barrier()
            after = counters_mj(handles)
            t1 = time.monotonic()
        # Rank 0 is its node's first local rank: it holds both.
        if rank == 0:
            report = w.report.json
            node = report["nodes"][0]
            gpus = [d for d in node["devices"] if d["kind"] == "gpu"]
            counter_j = [(b - a) / 1000.0 for a, b in zip(before, after)]
            row = {"window": name, "joule_elapsed_s": node["elapsed_s"], "counter_span_s": t1 - t0,
                   "joule_gpu_j": [g["energy_j"] for g in gpus], "gpu_names": [g["name"] for g in gpus],
                   "counter_gpu_j": counter_j, "joule_total_j": report["total_energy_j"],
                   "complete": report.get("complete"), "world_size": world}
            results.append(row)
            per_gpu = ", ".join(
                f"{g['name'].split()[0]} joule {j:.1f} J counter {c:.1f} J ({100 * (j / c - 1):+.2f}%)"
                for g, j, c in zip(gpus, row["joule_gpu_j"], counter_j))
            total_j, total_c = sum(row["joule_gpu_j"]), sum(counter_j)
            print(f"{name}: {node['elapsed_s']:.2f} s; {per_gpu}; GPUs total joule {total_j:.1f} J counter "
                  f"{total_c:.1f} J ({100 * (total_j / total_c - 1):+.2f}%)", flush=True)
            print(w.report.text, flush=True)
    if rank == 0 and args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
