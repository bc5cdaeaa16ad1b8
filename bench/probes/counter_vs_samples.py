#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: how the energy counter's steps line up with the driver's power
samples. One process polls the counter back to back (each call ~3.8 ms on an
H100), another drains the sample buffer every 50 ms; separate processes, so
neither waits for the other's interpreter lock. Both log CLOCK_MONOTONIC.

Usage: counter_vs_samples.py OUT_DIR SECONDS
"""
import csv
import ctypes
import multiprocessing as mp
import os
import sys
import time

import pynvml as n


def poll_counter(path, seconds):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    rows, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        v = n.nvmlDeviceGetTotalEnergyConsumption(h)
        rows.append((t0, time.monotonic(), v))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("t_start_s", "t_end_s", "energy_mj"), *rows])


def drain_samples(path, seconds):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    fn = n._nvmlGetFunctionPointer("nvmlDeviceGetSamples")
    buf = (n.c_nvmlSample_t * 120)()
    vtype, last, rows = ctypes.c_int(), 0, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        count = ctypes.c_uint(120)
        wall_minus_mono = time.time() - time.monotonic()
        if fn(h, 0, ctypes.c_ulonglong(last), ctypes.byref(vtype), ctypes.byref(count), buf) == 0:
            for i in range(count.value):
                if buf[i].timeStamp > last:
                    rows.append((buf[i].timeStamp * 1e-6 - wall_minus_mono, buf[i].sampleValue.uiVal))
            last = max([last] + [buf[i].timeStamp for i in range(count.value)])
        time.sleep(0.05)
    rows.sort()
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("t_s", "power_mw"), *rows])


if __name__ == "__main__":
    out, seconds = sys.argv[1], float(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    procs = [mp.Process(target=poll_counter, args=(f"{out}/counter.csv", seconds)),
             mp.Process(target=drain_samples, args=(f"{out}/samples.csv", seconds))]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
