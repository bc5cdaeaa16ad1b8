#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A window from Python, side by side in one process on 8 simulated GPUs:
Monitor.begin_window + end_window (the module's floor) against
`with monitor.window(...)` (the joule.Window both window calls give), three
rounds of 20,000 each; then monitor.window after 1,000 windows and after
1,002,000.  PYTHONPATH=build/python python3 bench/python_window_cost.py"""
import time, joule
m = joule.Monitor(backend="sim", sim="count=8", interval_ms=10)
def raw(n):
    t=time.perf_counter()
    for _ in range(n):
        m.begin_window("w"); m.end_window("w")
    return (time.perf_counter()-t)/n*1e6
def ctx(n):
    t=time.perf_counter()
    for _ in range(n):
        with m.window("w"): pass
    return (time.perf_counter()-t)/n*1e6
for rnd in range(3):
    print(f"round {rnd}: begin/end {raw(20000):.2f} us, monitor.window {ctx(20000):.2f} us")
ctx(1000); first=ctx(1000)
for _ in range(10): ctx(100000)
last=ctx(1000)
print(f"monitor.window after 1,000: {first:.2f} us; after 1,002,000: {last:.2f} us")
