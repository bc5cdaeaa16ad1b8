#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: does an attribution on a real GPU say when the GPU sat at its
power cap? A region of bf16 matmuls (which hold an H200 at its 700 W cap) with
a short idle gap each step, for --seconds; then joule.attribute's
power_capped_share and notes, and the timeline's power_capped column.
Changes no GPU setting.

  /tmp/joule-venv/bin/python bench/probes/cap_note.py [--seconds 8] [--gap-ms 20] [--timeline PATH]
"""
import argparse
import collections
import csv
import time

import torch

import joule
import joule.torch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--gap-ms", type=float, default=20.0, help="idle time after each step's matmuls")
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--timeline", help="write the monitor's timeline CSV here")
    args = p.parse_args()
    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    monitor = joule.Monitor(gpus=[0], synchronize=joule.torch.synchronizer())
    recorder = joule.RegionRecorder(monitor)
    for _ in range(10):  # warm-up
        a @ b
    torch.cuda.synchronize()
    steps = 0
    with monitor.window("cap note") as w:
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end:
            with recorder.region("matmul"):
                for _ in range(20):
                    a @ b
            time.sleep(args.gap_ms / 1e3)
            steps += 1
    [attribution] = joule.attribute(monitor, w.settled(timeout_s=10.0), recorder, bootstrap_rounds=0)
    print(f"{steps} steps over {w.elapsed_s:.2f} s, {w.energy_j:.0f} J ({w.average_power_w:.0f} W)")
    print(f"power_capped_share: {attribution.power_capped_share:.3f}")
    for r in attribution.regions:
        print(f"region {r.name}: {r.power_w:.0f} W, {100 * r.share:.1f}% of the energy")
    print(f"baseline {attribution.baseline_w:.0f} W")
    for note in attribution.notes:
        print(f"note: {note}")
    if args.timeline:
        monitor.write_timeline_csv(args.timeline)
        with open(args.timeline) as f:
            states = collections.Counter(row["power_capped"] for row in csv.DictReader(f))
        print(f"timeline power_capped values: {dict(states)}")


if __name__ == "__main__":
    main()
