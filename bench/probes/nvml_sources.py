#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only probe of the NVML power and energy sources on one GPU.

Times each source and records all of them at ~1 kHz for a few seconds while a
pulsed load runs, to see how often each updates and how each lags. Changes
no GPU setting.
"""
import csv
import subprocess
import sys
import time

import pynvml as n

FI_ENERGY = 83    # NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ
FI_AVERAGE = 185  # NVML_FI_DEV_POWER_AVERAGE, mW
FI_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT, mW


def field(h, fid):
    v = n.nvmlDeviceGetFieldValues(h, [fid])[0]
    if v.nvmlReturn != 0:
        return None
    return v.value.ullVal if fid == FI_ENERGY else v.value.uiVal


def timed(fn, count):
    t0 = time.perf_counter()
    c0 = time.process_time()
    for _ in range(count):
        fn()
    return (time.perf_counter() - t0) / count * 1e6, (time.process_time() - c0) / count * 1e6


def main(out_csv):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    print("energy field:", field(h, FI_ENERGY), "counter:", n.nvmlDeviceGetTotalEnergyConsumption(h))
    print("avg field:", field(h, FI_AVERAGE), "instant field:", field(h, FI_INSTANT), "usage:", n.nvmlDeviceGetPowerUsage(h))
    for name, fn, count in [
        ("GetTotalEnergyConsumption", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h), 50),
        ("FieldValues(83 energy)", lambda: field(h, FI_ENERGY), 2000),
        ("FieldValues(185 average)", lambda: field(h, FI_AVERAGE), 2000),
        ("FieldValues(186 instant)", lambda: field(h, FI_INSTANT), 2000),
        ("GetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h), 2000),
    ]:
        wall_us, cpu_us = timed(fn, count)
        print(f"{name}: {wall_us:.1f} us wall, {cpu_us:.1f} us cpu per call")

    load = subprocess.Popen([sys.executable, "bench/gpu_load.py", "--mode", "pulse", "--half-period-s", "1",
                             "--seconds", "12"])
    time.sleep(4)
    rows = []
    end = time.perf_counter() + 6
    counter_every = 0
    while time.perf_counter() < end:
        t = time.perf_counter()
        row = [t, field(h, FI_ENERGY), field(h, FI_AVERAGE), field(h, FI_INSTANT), n.nvmlDeviceGetPowerUsage(h)]
        counter_every += 1
        row.append(n.nvmlDeviceGetTotalEnergyConsumption(h) if counter_every % 20 == 0 else "")
        rows.append(row)
        while time.perf_counter() < t + 0.001:
            pass
    load.wait()
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "energy_field_mj", "avg_field_mw", "instant_field_mw", "usage_mw", "counter_mj"])
        w.writerows(rows)
    # how often each source changes
    for col, name in [(1, "energy field"), (2, "avg field"), (3, "instant field"), (4, "usage")]:
        changes = [rows[i][0] for i in range(1, len(rows)) if rows[i][col] != rows[i - 1][col]]
        gaps = sorted(b - a for a, b in zip(changes, changes[1:]))
        med = gaps[len(gaps) // 2] * 1e3 if gaps else float("nan")
        print(f"{name}: {len(changes)} changes in 6 s, median gap {med:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
