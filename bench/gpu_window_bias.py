#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Loaded and idle windows of a young monitor against a continuous counter
reference, with what the reference assumes at each edge. Read-only.

Under torchrun (NCCL or Gloo, one rank per GPU, joule.distributed with a
synchronizer) or as one process (--single: a joule.Monitor over --gpus, the
load on each): a burst of bf16 matrix products, the monitor made at once,
then windows at once: idle 10 s, loaded 5 s, idle 5 s, loaded 5 s, then
--pairs more idle/loaded pairs, so the monitor's age runs to a minute and
more. Every window's load starts after its begin edge and ends at its end
edge (the synchronizer waits for it), as in a training loop whose windows
hold its work.

The reference: on the leader, one thread per GPU reads its energy counter
back to back (~4 ms a read on an H200) for the whole run; each counter step
(100 ms on an H100/H200) is placed between the two reads around it. The
script keeps every step (the raw data) and the leader's windows: each
settled Measurement, its edges on time.monotonic, and per GPU the method,
the calibration scale and whether it was pinned to counter steps. The
analysis (bench/window_bias_analysis.py) computes the reference's energy at
each edge from those steps.

  torchrun --nproc-per-node 2 bench/gpu_window_bias.py --backend nccl --out nccl.json
  python3 bench/gpu_window_bias.py --single --gpus 0 --out single-1gpu.json
"""
import argparse
import json
import os
import threading
import time

import pynvml
import torch

import joule
import joule.distributed
import joule.torch
from gpu_first_window import RecordingMonitor, record_leader, sources  # this folder's


class CounterSteps:
    """One thread per GPU reads its energy counter back to back; each change
    is kept as (after_s, before_s, value_mJ): the step happened between the
    midpoints of the last read that did not see it and the first that did."""

    def __init__(self, handles):
        self.steps = [[] for _ in handles]
        self.reads = [0 for _ in handles]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i, h), daemon=True) for i, h in enumerate(handles)]
        for t in self.threads:
            t.start()

    def run(self, i, handle):
        last_mid, last_value = None, None
        steps = self.steps[i]
        n = 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            value = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            mid = 0.5 * (t0 + time.monotonic())
            n += 1
            if last_value is not None and value != last_value:
                steps.append((last_mid, mid, value))
            last_mid, last_value = mid, value
        self.reads[i] = n

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--single", action="store_true", help="one process, a plain joule.Monitor")
    parser.add_argument("--gpus", default="", help="--single: the GPUs to measure and load (default: all)")
    parser.add_argument("--pairs", type=int, default=6, help="idle/loaded pairs after the first four windows")
    parser.add_argument("--burst-s", type=float, default=4.0, help="load before the monitor is made")
    parser.add_argument("--gap-s", type=float, default=0.0, help="extra idle time between windows")
    parser.add_argument("--out", help="the windows and the counter steps (JSON)")
    args = parser.parse_args()

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    dist = torch.distributed
    if not args.single:
        dist.init_process_group(args.backend)
    rank = dist.get_rank() if not args.single else 0
    local = int(os.environ.get("LOCAL_RANK", 0))
    count = torch.cuda.device_count()
    if args.single:
        gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else list(range(count))
    else:
        gpus = [local % count]
    torch.cuda.set_device(gpus[0])

    # One product per GPU this process loads; each launch keeps the GPU at its limit.
    width = 8192
    mats = {g: torch.randn(width, width, device=f"cuda:{g}", dtype=torch.bfloat16) for g in gpus}

    def product():
        for a in mats.values():
            torch.matmul(a, a)

    def sync():
        for g in gpus:
            torch.cuda.synchronize(g)

    handles = []
    if local == 0:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in (gpus if args.single else range(count))]
    reference = CounterSteps(handles) if handles else None
    time.sleep(1.0)  # steps before the burst, so its first edges are placed too

    for _ in range(20):
        product()
    sync()
    start = time.monotonic()
    for _ in range(50):
        product()
    sync()
    per_s = 50 / (time.monotonic() - start)
    if not args.single:
        n = torch.tensor([per_s], device="cuda")
        dist.all_reduce(n, op=dist.ReduceOp.MIN)
        per_s = float(n.item())

    def load(seconds):
        for _ in range(max(1, int(per_s * seconds))):
            product()

    load(args.burst_s)
    sync()
    burst_end_s = time.monotonic()
    synchronize = sync if args.single else joule.torch.synchronizer()
    if args.single:
        recorder = RecordingMonitor(joule.Monitor(gpus=gpus, synchronize=synchronize))
        monitor = recorder
    else:
        monitor = joule.distributed.DistributedMonitor(synchronize=synchronize, timeout_s=120)
        recorder = record_leader(monitor)
    offset_s = recorder.monotonic_offset_s if recorder is not None else None
    made_s = time.monotonic()

    schedule = [("idle", 10.0), ("loaded", 5.0), ("idle", 5.0), ("loaded", 5.0)]
    schedule += [("idle", 5.0), ("loaded", 5.0)] * args.pairs
    windows = []
    for k, (kind, seconds) in enumerate(schedule):
        name = f"{k:02d}-{kind}"
        if not args.single:
            dist.barrier()
        monitor.begin_window(name)
        if kind == "loaded":
            load(seconds)
        else:
            time.sleep(seconds)
        if args.single:
            recorder.settle(monitor.end_window(name), 2.0)
        else:
            monitor.end_window(name)
        if recorder is not None and name in recorder.settled:
            m = recorder.settled[name]
            row = {"window": name, "kind": kind, "begin_s": m.begin_s + offset_s, "end_s": m.end_s + offset_s,
                   "age_s": m.begin_s + offset_s - made_s, "elapsed_s": m.elapsed_s, "settled": m.settled,
                   "joule_gpu_j": list(m.gpu_energy_j), "sources": sources(m), "warnings": list(m.warnings)}
            windows.append(row)
            per_gpu = ", ".join(f"{j:.1f} J {s['method']} x{s['scale']:.4f}{' anchored' if s['anchored'] else ''}"
                                for j, s in zip(row["joule_gpu_j"], row["sources"]))
            print(f"{name}: age {row['age_s']:.2f} s, {m.elapsed_s:.3f} s: {per_gpu}", flush=True)
        if args.gap_s > 0:
            time.sleep(args.gap_s)
    if reference is not None:
        time.sleep(0.5)  # steps past the last end edge
        reference.finish()
    # Each GPU's load ended with its rank's burst (ranks may run apart): every rank's end, per GPU.
    burst_ends = {g: burst_end_s for g in gpus}
    if not args.single:
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, burst_ends)
        burst_ends = {g: max(t for ends in everyone for gg, t in ends.items() if gg == g) for g in range(count)}
    if rank == 0 and args.out:
        setup = {"backend": "single" if args.single else args.backend, "gpus": gpus if args.single else
                 list(range(count)), "world_size": 1 if args.single else dist.get_world_size(),
                 "burst_end_s": burst_end_s, "monitor_made_s": made_s,
                 "burst_end_s_per_gpu": [burst_ends[g] for g in sorted(burst_ends)], "driver": pynvml.nvmlSystemGetDriverVersion(),
                 "names": [pynvml.nvmlDeviceGetName(h) for h in handles], "reads": reference.reads,
                 "joule_version": getattr(joule, "__version__", "")}
        with open(args.out, "w") as out:
            json.dump({"setup": setup, "windows": windows, "steps": reference.steps}, out)
    if not args.single:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
