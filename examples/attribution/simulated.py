#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per region of a training step, tried without a GPU.

    PYTHONPATH=build/python python3 examples/attribution/simulated.py

The simulated GPU draws a power per region: each region sets the load it
would put on a real GPU as it begins (forward at full load, backward at
70%, the optimizer's step at 30%, and an idle gap between steps), the GPU
keeps 20 ms power samples as a real H100 does, and joule.attribute splits
the window's energy among the regions from those samples, regions far
shorter than a sample included. Four seconds of steps, then a table per GPU:
each region's power comes out near the power its load draws (here 560 W,
410 W and 210 W over a 60 W idle), with its interval.

On a real GPU, joule.torch.attribute(model, monitor) records a model's
regions for you (docs/attribution.md); this example shows
what the fit does with regions whose power is known.
"""
import argparse
import json
import random
import sys
import time

import joule
import joule.attribution

IDLE_W, FULL_W = 60.0, 560.0
# name, load (0-1), mean seconds per call (each drawn within +-20%)
REGIONS = [("forward", 1.0, 0.006), ("backward", 0.7, 0.008), ("optimizer", 0.3, 0.002)]
GAP_S = 0.002  # idle between steps


def busy_wait(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_steps(monitor, recorder, seconds, rng):
    """Each region's load set on the GPUs as it begins, its edge at that moment."""
    def switch(name, load, current):
        at_s = recorder.clock_s()
        monitor.set_simulated_load(load)
        if current is not None:
            recorder.end(current, at_s=at_s)
        if name is not None:
            recorder.begin(name, at_s=at_s)
        return name

    current = switch(None, 0.0, None)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for name, load, mean_s in REGIONS:
            current = switch(name, load, current)
            busy_wait(mean_s * rng.uniform(0.8, 1.2))
        current = switch(None, 0.0, current)
        busy_wait(GAP_S * rng.uniform(0.5, 1.5))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=4.0, help="how long to run steps (default 4)")
    p.add_argument("--json", action="store_true", help="print joule.attribution.to_json instead of the tables")
    args = p.parse_args()
    monitor = joule.Monitor(backend="sim", sim=f"count=1,load=0,idle_w={IDLE_W:g},full_w={FULL_W:g},sample_ms=20",
                            interval_ms=10)
    recorder = joule.RegionRecorder(monitor)
    time.sleep(0.1)  # a little idle first
    with monitor.window("train") as w:
        run_steps(monitor, recorder, args.seconds, random.Random(1))
    attributions = joule.attribute(monitor, w.settled(timeout_s=5.0), recorder, block_s=0.25)
    if args.json:
        print(json.dumps(joule.attribution.to_json(attributions)))
    else:
        for gpu, a in enumerate(attributions):
            print(joule.attribution.format_table(a, gpu_label=f"GPU {gpu} (simulated)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
