#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: what a region edge's CUDA event costs the GPU (not the host),
between kernels that run back to back (issue 53, item 3: where the GPU edges'
share of a queued step goes, bench/README.md section 16p). Changes no GPU
setting.

The GPU first sleeps (torch.cuda._sleep) while the host queues --kernels
elementwise kernels of --elements bf16 each: with nothing between them, with a
GpuClock edge (joule's CUDA runtime events, which time) after each --every'th,
or a torch.cuda.Event record there (without timing, torch's default; and with).
So the kernels and events run back to back on the GPU, and two timing events
around them give the GPU's time. Per kind the median over --repeats, and the
GPU time each event adds.

  /tmp/joule-venv/bin/python bench/probes/event_gpu_cost.py [--kernels 2000] [--elements 4194304,16777216,67108864]
"""
import argparse
import statistics

import torch

import joule
import joule.torch


def gpu_ms(x, kernels, edge, every, sleep_cycles):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(sleep_cycles)  # the host queues everything below meanwhile
    start.record()
    for i in range(kernels):
        x.add_(1.0)
        if edge is not None and i % every == 0:
            edge(i)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", type=int, default=2000)
    p.add_argument("--elements", default="4194304,16777216,67108864", help="kernel sizes, bf16 elements each")
    p.add_argument("--every", default="1,4", help="an event after every N-th kernel")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--sleep-cycles", type=int, default=200_000_000, help="the GPU's head start (~0.1 s)")
    args = p.parse_args()
    monitor = joule.Monitor(interval_ms=100)
    recorder = joule.RegionRecorder(monitor)
    clock = joule.torch.GpuClock(recorder)
    torch_events = [torch.cuda.Event() for _ in range(args.kernels)]  # no timing: a marker only
    timing_events = [torch.cuda.Event(enable_timing=True) for _ in range(args.kernels)]

    open_ = [False]

    def joule_edge(_i):  # begin and end in turn, whichever kernels they follow
        (clock.end if open_[0] else clock.begin)("r")
        open_[0] = not open_[0]

    def torch_edge(i):
        torch_events[i].record()

    def torch_timing_edge(i):
        timing_events[i].record()

    print(f"{torch.cuda.get_device_name(0)}; {args.kernels} kernels a run, medians of {args.repeats}")
    print(f"{'elements':>10s} {'every':>5s} {'kind':>12s} {'GPU ms':>8s} {'us/kernel':>10s} {'us/event':>9s}")
    for elements in (int(e) for e in args.elements.split(",")):
        x = torch.zeros(elements, device="cuda", dtype=torch.bfloat16)
        for every in (int(e) for e in args.every.split(",")):
            events = len(range(0, args.kernels, every))
            kinds = (("none", None), ("joule edge", joule_edge), ("torch event", torch_edge),
                     ("torch timing", torch_timing_edge))
            times = {k: [] for k, _ in kinds}
            for _ in range(args.repeats):  # interleaved
                for kind, edge in kinds:
                    times[kind].append(gpu_ms(x, args.kernels, edge, every, args.sleep_cycles))
                if open_[0]:
                    joule_edge(0)
                clock.flush()
            base = statistics.median(times["none"])
            for kind, ms in times.items():
                m = statistics.median(ms)
                added = f"{1e3 * (m - base) / events:9.2f}" if kind != "none" else f"{'':9s}"
                print(f"{elements:10d} {every:5d} {kind:>12s} {m:8.2f} {1e3 * m / args.kernels:10.2f} {added}")


if __name__ == "__main__":
    main()
