#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: cost of nvmlDeviceGetSamples(TOTAL_POWER) beside the other power
reads, the buffer's capacity and sample spacing (pynvml + ctypes)."""
import ctypes
import time

import pynvml as n

n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
lib = n.nvmlLib if hasattr(n, "nvmlLib") else n._nvmlGetFunctionPointer.__globals__["nvmlLib"]
fn = n._nvmlGetFunctionPointer("nvmlDeviceGetSamples")
vtype = ctypes.c_int()
count = ctypes.c_uint()
print("capacity rc", fn(h, 0, ctypes.c_ulonglong(0), ctypes.byref(vtype), ctypes.byref(count), None), "count", count.value)
cap = count.value
buf = (n.c_nvmlSample_t * cap)()


def drain(last):
    c = ctypes.c_uint(cap)
    rc = fn(h, 0, ctypes.c_ulonglong(last), ctypes.byref(vtype), ctypes.byref(c), buf)
    return rc, c.value


rc, got = drain(0)
ts = sorted(buf[i].timeStamp for i in range(got))
print("full drain rc", rc, "got", got, "span ms", (ts[-1] - ts[0]) / 1e3, "median gap ms", sorted(b - a for a, b in zip(ts, ts[1:]))[len(ts) // 2] / 1e3)
print("newest sample age ms", (time.time() * 1e6 - ts[-1]) / 1e3)
for label, last in [("full buffer", 0), ("nothing new", ts[-1])]:
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(2000):
        drain(last)
    print(f"GetSamples {label}: {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us wall, {(time.process_time() - c0) / 2000 * 1e6:.1f} us cpu")
last = ts[-1]
lat = []
t0, c0, calls = time.perf_counter(), time.process_time(), 0
while time.perf_counter() < t0 + 3:
    rc, got = drain(last)
    calls += 1
    if rc == 0 and got:
        newest = max(buf[i].timeStamp for i in range(got))
        lat.append(time.time() * 1e6 - newest)
        last = newest
    time.sleep(0.1)
print(f"every 100 ms: {calls} calls, new samples age when read median {sorted(lat)[len(lat)//2]/1e3:.1f} ms")
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(2000):
    n.nvmlDeviceGetPowerUsage(h)
print(f"GetPowerUsage: {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us wall, {(time.process_time() - c0) / 2000 * 1e6:.1f} us cpu")
# visibility latency: poll fast and note when each new sample first appears
seen = []
end = time.perf_counter() + 2
while time.perf_counter() < end:
    rc, got = drain(last)
    if rc == 0 and got:
        for i in range(got):
            seen.append(time.time() * 1e6 - buf[i].timeStamp)
        last = max(buf[i].timeStamp for i in range(got))
seen.sort()
print(f"fast polling: sample age when first visible min {seen[0]/1e3:.2f} median {seen[len(seen)//2]/1e3:.2f} max {seen[-1]/1e3:.2f} ms over {len(seen)}")
