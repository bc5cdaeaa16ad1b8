#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Does a window cost the same from Python after a million others? The
Python twin of joule_bench_window_cost: begin_window + end_window through the
module, on 8 simulated GPUs and (given the fake library) 8 fake-NVML GPUs,
back to back and paced at one window per step (sleeping between steps, and
spinning), cost at the start and at the end side by side: medians over slices
of the run, in nanoseconds. Each pacing also times, for 5 s, the least a call
into the module could cost (a field of a Measurement read through pybind11: the
interpreter's call into pybind11 and back, no joule work), the floor this
machine charges.

  PYTHONPATH=build/python python3 bench/window_cost.py
  PYTHONPATH=build/python python3 bench/window_cost.py --windows 200000 --paced-s 10 \
      --fake-nvml build/tests/fake_nvml/libnvidia-ml.so.1
"""
import argparse
import os
import statistics
import time

import joule

FAKE_H100 = ('device name="NVIDIA H100 80GB HBM3 (fake)" power_w=100 pulse_w=700 profile=random seed={seed} '
             'min_phase_ms=150 max_phase_ms=2500 min_limit_w=200 max_limit_w=700 energy_call_ms=4 '
             'energy_update_ms=100 power_update_ms=100 usage_window_ms=1000 sample_ms=20 sample_buffer=120 '
             'sample_stamp_lead_ms=4.5\n')


def window_ns(monitor):
    start = time.perf_counter_ns()
    monitor.begin_window("step")
    monitor.end_window("step")
    return time.perf_counter_ns() - start


def median(values):  # medians: a preempted window says nothing about the window
    return statistics.median(values) if values else 0.0


def tenths(ns):
    return " ".join(f"{median(ns[len(ns) * t // 10:len(ns) * (t + 1) // 10]):.0f}" for t in range(10))


def back_to_back(label, monitor, windows):
    start = time.monotonic()
    ns = [window_ns(monitor) for _ in range(windows)]
    run_s = time.monotonic() - start
    cut = max(1, windows // 100)
    print(f"back-to-back {label:>4} x8  {windows} windows in {run_s:.1f} s  first 1%: {median(ns[:cut]):.0f} ns  "
          f"last 1%: {median(ns[-cut:]):.0f} ns  all: {median(ns):.0f} ns  per tenth: {tenths(ns)}",
          flush=True)


def paced_ns(hz, seconds, pacing, timed):
    period_ns = int(1e9 / hz)
    ns = []
    next_ns = time.perf_counter_ns()
    for _ in range(int(hz * seconds)):
        next_ns += period_ns
        ns.append(timed())
        if pacing == "sleep":
            delay_ns = next_ns - time.perf_counter_ns()
            if delay_ns > 0:
                time.sleep(delay_ns / 1e9)
        else:
            while time.perf_counter_ns() < next_ns:
                pass
    return ns


def paced(label, pacing, monitor, hz, seconds):
    ns = paced_ns(hz, seconds, pacing, lambda: window_ns(monitor))
    per_second = int(hz)
    print(f"paced {pacing:>5}  {label:>4} x8  {hz:.0f} Hz for {seconds:.0f} s  first second: "
          f"{median(ns[:per_second]):.0f} ns  last second: {median(ns[-per_second:]):.0f} ns  all: {median(ns):.0f} ns  "
          f"per tenth: {tenths(ns)}", flush=True)


def machine_floor(pacing, hz, monitor):
    # A field of a Measurement read through the module: one interpreter call
    # into pybind11 and back, what begin_window and end_window each pay at least.
    monitor.begin_window("floor")
    measurement = monitor.end_window("floor")

    def timed():
        start = time.perf_counter_ns()
        measurement.elapsed_s  # noqa: B018 (the call is what is timed)
        return time.perf_counter_ns() - start
    ns = paced_ns(hz, 5.0, pacing, timed)
    print(f"paced {pacing:>5}  floor: one call into the module  {hz:.0f} Hz for 5 s  all: {median(ns):.0f} ns",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=1_000_000, help="back-to-back windows (0: skip)")
    parser.add_argument("--paced-hz", type=float, default=1000.0)
    parser.add_argument("--paced-s", type=float, default=60.0, help="paced run length (0: skip)")
    parser.add_argument("--fake-nvml", help="the fake libnvidia-ml.so.1: adds 8 fake H100s")
    parser.add_argument("--pacing", choices=["sleep", "spin"], help="one pacing only (default: both)")
    args = parser.parse_args()

    monitors = [("sim", lambda: joule.Monitor(backend="sim", sim="count=8,load=0.8"))]
    if args.fake_nvml:
        config = "/tmp/joule-bench-window-cost-fake-nvml.conf"
        with open(config, "w") as out:
            out.writelines(FAKE_H100.format(seed=3 + i) for i in range(8))
        os.environ["JOULE_FAKE_NVML_CONFIG"] = config
        os.environ["JOULE_NVML_LIBRARY"] = args.fake_nvml
        monitors.append(("fake", lambda: joule.Monitor(backend="nvml")))
    pacings = [args.pacing] if args.pacing else ["sleep", "spin"]
    for label, make in monitors:
        if args.windows > 0:
            back_to_back(label, make(), args.windows)
        for pacing in pacings if args.paced_s > 0 else []:
            paced(label, pacing, make(), args.paced_hz, args.paced_s)
    if args.paced_s > 0:
        floor_monitor = monitors[0][1]()
        for pacing in pacings:
            machine_floor(pacing, args.paced_hz, floor_monitor)


if __name__ == "__main__":
    main()
