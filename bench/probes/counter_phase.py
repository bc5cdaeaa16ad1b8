#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: when do the energy counter's ~100 ms steps happen, how regular
are they, and does anything cheap (power usage, 0.4 us per read) change at the
same instants? One process polls the counter back to back, another polls power
usage every ~0.5 ms; both log CLOCK_MONOTONIC. Changes no GPU setting.

Usage: counter_phase.py OUT_DIR SECONDS
"""
import csv
import multiprocessing as mp
import statistics
import sys
import time

import pynvml as n


def poll_counter(path, seconds):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    rows, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0, c0 = time.monotonic(), time.thread_time()
        v = n.nvmlDeviceGetTotalEnergyConsumption(h)
        rows.append((t0, time.monotonic(), time.thread_time() - c0, v))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("t_start_s", "t_end_s", "cpu_s", "energy_mj"), *rows])


def poll_usage(path, seconds):
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    rows, last, end = [], None, time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        v = n.nvmlDeviceGetPowerUsage(h)
        t1 = time.monotonic()
        if v != last:
            rows.append((t0, t1, v))
            last = v
        time.sleep(0.0004)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("t_start_s", "t_end_s", "power_mw"), *rows])


def load(path):
    with open(path) as f:
        r = csv.reader(f)
        next(r)
        return [tuple(float(x) for x in row) for row in r]


def counter_steps(reads):
    """Step time: midpoint between the end of the last read with the old value
    and the start of the first read with the new one."""
    steps = []
    for a, b in zip(reads, reads[1:]):
        if b[3] != a[3]:
            steps.append(((a[1] + b[0]) / 2, b[0] - a[1] + (a[1] - a[0] + b[1] - b[0]) / 2, b[3] - a[3]))
    return steps


def main():
    out, seconds = sys.argv[1], float(sys.argv[2])
    procs = [mp.Process(target=poll_counter, args=(f"{out}/counter.csv", seconds)),
             mp.Process(target=poll_usage, args=(f"{out}/usage.csv", seconds))]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    reads, usage = load(f"{out}/counter.csv"), load(f"{out}/usage.csv")
    cpu = sorted(r[2] * 1e3 for r in reads)
    print(f"counter reads: {len(reads)}, cpu per read median {cpu[len(cpu)//2]:.2f} ms")
    steps = counter_steps(reads)
    gaps = [(b[0] - a[0]) * 1e3 for a, b in zip(steps, steps[1:])]
    print(f"steps: {len(steps)}, spacing ms: median {statistics.median(gaps):.2f} "
          f"p5 {sorted(gaps)[len(gaps)//20]:.2f} p95 {sorted(gaps)[len(gaps)*19//20]:.2f} "
          f"min {min(gaps):.2f} max {max(gaps):.2f}")
    # Regular grid? Number each step by rounding its distance from the first to
    # 100 ms units, fit a line, report residuals (uncertainty of each step time
    # is about half a read).
    t0 = steps[0][0]
    ks = [round((s[0] - t0) / 0.1) for s in steps]
    mk, ms = statistics.mean(ks), statistics.mean(s[0] for s in steps)
    slope = sum((k - mk) * (s[0] - ms) for k, s in zip(ks, steps)) / sum((k - mk) ** 2 for k in ks)
    res = [(s[0] - (ms + slope * (k - mk))) * 1e3 for k, s in zip(ks, steps)]
    print(f"grid fit: period {slope*1e3:.4f} ms, residual ms: sd {statistics.pstdev(res):.2f} "
          f"min {min(res):.2f} max {max(res):.2f}; half-read uncertainty median "
          f"{statistics.median(s[1] for s in steps)*1e3/2:.2f} ms")
    # Residual drift over time: residuals in 5 s chunks.
    chunk = {}
    for k, s, r in zip(ks, steps, res):
        chunk.setdefault(int((s[0] - t0) // 5), []).append(r)
    print("residual mean per 5 s:", " ".join(f"{statistics.mean(v):+.2f}" for v in chunk.values()))
    # Power usage changes against the nearest counter step.
    st = [s[0] for s in steps]
    offs = []
    import bisect
    for u in usage[1:]:
        tm = (u[0] + u[1]) / 2
        i = bisect.bisect_left(st, tm)
        cands = [st[j] for j in (i - 1, i) if 0 <= j < len(st)]
        if cands:
            offs.append((tm - min(cands, key=lambda s: abs(s - tm))) * 1e3)
    offs.sort()
    ugaps = [(b[0] - a[0]) * 1e3 for a, b in zip(usage, usage[1:])]
    print(f"power usage changes: {len(usage)}, spacing median {statistics.median(ugaps):.2f} ms; "
          f"offset to nearest counter step ms: p5 {offs[len(offs)//20]:.2f} median "
          f"{offs[len(offs)//2]:.2f} p95 {offs[len(offs)*19//20]:.2f}")


if __name__ == "__main__":
    main()
