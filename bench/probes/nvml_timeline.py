#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only recording of every NVML power/energy source on one GPU, for
offline analysis and replay (pynvml; changes no GPU setting).

One thread polls the energy counter back to back (each call ~3.8 ms on an
H100) and logs (start, end, value); the main thread polls power usage and the
instantaneous and average power fields at ~2 kHz and logs each change; every
0.5 s it drains nvmlDeviceGetSamples(TOTAL_POWER) where the driver has it.
Times are time.perf_counter_ns() (CLOCK_MONOTONIC) in seconds.

Usage: nvml_timeline.py OUT_DIR SECONDS [GPU]
"""
import csv
import os
import sys
import threading
import time

import pynvml as n

FI_AVERAGE = 185
FI_INSTANT = 186


def now_s():
    return time.perf_counter_ns() * 1e-9


def main(out_dir, seconds, gpu):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(gpu)
    stop = threading.Event()
    counter_rows = []

    def poll_counter():
        while not stop.is_set():
            t0 = now_s()
            value = n.nvmlDeviceGetTotalEnergyConsumption(h)
            counter_rows.append((t0, now_s(), value))

    def field(fid):
        v = n.nvmlDeviceGetFieldValues(h, [fid])[0]
        return (v.value.uiVal, v.timestamp) if v.nvmlReturn == 0 else (None, None)

    thread = threading.Thread(target=poll_counter)
    thread.start()
    power_rows = []
    sample_rows = []
    last = None
    last_samples_ts = 0
    next_drain = now_s()
    end = now_s() + seconds
    wall_offset = time.time() - now_s()
    while now_s() < end:
        t = now_s()
        usage = n.nvmlDeviceGetPowerUsage(h)
        inst, inst_ts = field(FI_INSTANT)
        avg, avg_ts = field(FI_AVERAGE)
        key = (usage, inst, avg)
        if key != last:
            power_rows.append((t, usage, inst, inst_ts, avg, avg_ts))
            last = key
        if t >= next_drain:
            next_drain = t + 0.5
            try:
                _, samples = n.nvmlDeviceGetSamples(h, n.NVML_TOTAL_POWER_SAMPLES, last_samples_ts)
                for s in samples:
                    sample_rows.append((t, s.timeStamp, s.sampleValue.uiVal))
                    last_samples_ts = max(last_samples_ts, s.timeStamp)
            except n.NVMLError as e:
                if not sample_rows:
                    sample_rows.append((t, -1, str(e)))
        while now_s() < t + 0.0005:
            pass
    stop.set()
    thread.join()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "counter.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_start_s", "t_end_s", "energy_mj"])
        w.writerows(counter_rows)
    with open(os.path.join(out_dir, "power.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "usage_mw", "instant_mw", "instant_ts_us", "average_mw", "average_ts_us"])
        w.writerows(power_rows)
    with open(os.path.join(out_dir, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_drain_s", "sample_ts_us", "power_mw"])
        w.writerows(sample_rows)
    print(f"wall clock - monotonic offset {wall_offset:.6f} s")
    print(f"{len(counter_rows)} counter reads, {len(power_rows)} power changes, {len(sample_rows)} buffered samples")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
