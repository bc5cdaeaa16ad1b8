#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: where joule.torch.attribute's host time goes in a real step
(issue 53, item 3: depth 2 of the GPT within 3%). Changes no GPU setting.

The GPT of gpu_attribution_models.py (12 blocks of 1024, batch 8 x 1024
tokens, bf16 autocast, AdamW), steps in blocks of each kind, interleaved:
plain, recorded at depth 2 forward only (phases=False), and recorded at depth
2 with phases (what the overhead bench measures), each with its edges as
CUDA events (the default) and as host instants (clock="host": a clock read,
so the difference is what the GPU edges cost in the step). Per kind, the median host
time to queue a step (until step() returns, before the sync) and the median
step time (to the end of its GPU work). Then cProfile over 30 recorded steps:
the Python functions with the most time of their own.

  /tmp/joule-venv/bin/python bench/probes/hook_cost.py [--depth 2] [--blocks 6] [--block 15]
"""
import argparse
import cProfile
import contextlib
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import joule  # noqa: E402
import joule.torch  # noqa: E402
from gpu_attribution_models import gpt_workload, no_region, step  # noqa: E402  (bench/)


def timed(work, region, n):
    host, total = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        step(work, region)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append(t1 - t0)
        total.append(time.perf_counter() - t0)
    return host, total


def compare(work, kinds, blocks, block, say=print, after_block=lambda: None):
    """Blocks of `block` steps of each kind, interleaved `blocks` times; per
    kind the median host time to queue a step and the median step, against
    "plain". kinds: {name: () -> a context manager yielding a session (its
    region() marks the step's data and loss) or None}."""
    results = {k: ([], []) for k in kinds}
    for _ in range(blocks):
        for kind, make in kinds.items():
            with make() as s:
                host, total = timed(work, s.region if s is not None else no_region, block)
            after_block()
            results[kind][0].extend(host)
            results[kind][1].extend(total)
    base_host, base_total = (statistics.median(x) for x in results["plain"])
    say(f"{'kind':28s} {'host/step':>10s} {'step':>9s} {'host +':>9s} {'step +':>8s}")
    for kind, (host, total) in results.items():
        h, t = statistics.median(host), statistics.median(total)
        say(f"{kind:28s} {1e3 * h:8.2f} ms {1e3 * t:7.2f} ms {1e3 * (h - base_host):+7.2f} ms "
            f"{100 * (t / base_total - 1):+7.2f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--block", type=int, default=15)
    args = p.parse_args()
    work = gpt_workload(8, 12, 1024, 16, 1024, 32000)
    monitor = joule.Monitor(interval_ms=100)
    timed(work, no_region, 10)  # warm-up

    def session(phases, clock="gpu"):
        return joule.torch.attribute(work.model, monitor, depth=args.depth, phases=phases, optimizer=work.opt,
                                     clock=clock)

    d = args.depth
    kinds = {"plain": contextlib.nullcontext, f"depth {d}, forward only": lambda: session(False),
             f"depth {d}, phases": lambda: session(True),
             f"depth {d}, forward only, host edges": lambda: session(False, "host"),
             f"depth {d}, phases, host edges": lambda: session(True, "host")}
    compare(work, kinds, args.blocks, args.block)

    profile = cProfile.Profile()
    with session(True) as s:
        timed(work, s.region, 5)
        profile.enable()
        timed(work, s.region, 30)
        profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
