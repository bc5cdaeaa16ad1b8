#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: over what span before its stamp does a buffered power sample
(nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES) average the GPU's power?
Attribution (docs/attribution.md) needs it: a wrong span biases every
region's power. Changes no GPU setting.

The GPU runs bursts of bf16 matmuls (~BURST ms) between idle gaps (~GAP ms),
a period that drifts against the driver's ~20 ms sampling; CUDA events mark
each burst on the GPU, placed on CLOCK_REALTIME (what the samples are stamped
with) through an event recorded right after a synchronise. The buffer is
drained every second. Then, offline or with --fit, for each cover C and stamp
offset L (sample i averaging (t_i + L - C, t_i + L]), the samples are fitted
as idle + (busy - idle) x the busy share of that span, and the (C, L) with the
least residual is the driver's.

Usage: sample_cover.py OUT.json [--seconds 30] [--burst-ms 10] [--gap-ms 13.3]
       sample_cover.py --fit OUT.json        (numpy only: no GPU needed)
"""
import argparse
import json
import time


def record(args):
    import pynvml as n
    import torch

    n.nvmlInit()
    handle = n.nvmlDeviceGetHandleByIndex(0)
    device = torch.device("cuda:0")
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    # How many matmuls make a burst of about burst_ms (timed once warm: the
    # first calls load the kernels).
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    per_matmul_s = (time.perf_counter() - t) / 20
    matmuls = max(1, round(args.burst_ms / 1000 / per_matmul_s))

    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    start.record()
    start.synchronize()
    start_realtime_s = time.time()  # the start event ran just before this
    bursts, samples = [], []
    last_stamp_us = 0
    next_drain = time.monotonic() + 1.0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        begin_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin_event.record()
        for _ in range(matmuls):
            a @ b
        end_event.record()
        end_event.synchronize()
        bursts.append((begin_event, end_event))
        time.sleep(args.gap_ms / 1000)
        if time.monotonic() >= next_drain:
            next_drain += 1.0
            _, got = n.nvmlDeviceGetSamples(handle, n.NVML_TOTAL_POWER_SAMPLES, last_stamp_us)
            for s in got:
                if s.timeStamp > last_stamp_us:
                    samples.append((s.timeStamp, s.sampleValue.uiVal))
            if got:
                last_stamp_us = max(last_stamp_us, max(s.timeStamp for s in got))
    intervals = [(start_realtime_s + start.elapsed_time(b0) / 1000, start_realtime_s + start.elapsed_time(b1) / 1000)
                 for b0, b1 in bursts]
    out = {"gpu": n.nvmlDeviceGetName(handle), "driver": n.nvmlSystemGetDriverVersion(),
           "matmuls_per_burst": matmuls, "per_matmul_ms": per_matmul_s * 1000, "burst_ms": args.burst_ms,
           "gap_ms": args.gap_ms, "bursts_realtime_s": intervals,
           "samples": [(ts / 1e6, mw / 1000.0) for ts, mw in sorted(set(samples))]}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"{len(intervals)} bursts of {matmuls} matmuls ({per_matmul_s * 1000:.2f} ms each), "
          f"{len(out['samples'])} samples")


def busy_share(starts, ends, lo, hi):
    """The share of each span [lo[i], hi[i]] covered by the sorted, disjoint intervals."""
    import numpy as np

    cum = np.concatenate([[0.0], np.cumsum(ends - starts)])

    def covered_before(t):
        i = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
        full = cum[np.maximum(i - 1, 0)]
        last = np.where(i > 0, np.clip(t - starts[np.maximum(i - 1, 0)], 0, (ends - starts)[np.maximum(i - 1, 0)]), 0)
        return np.where(i > 0, full + last, 0.0)

    return (covered_before(hi) - covered_before(lo)) / (hi - lo)


def fit(path):
    import numpy as np

    data = json.load(open(path))
    bursts = np.array(data["bursts_realtime_s"])
    starts, ends = bursts[:, 0], bursts[:, 1]
    samples = np.array(data["samples"])
    keep = (samples[:, 0] > starts[0] + 0.05) & (samples[:, 0] < ends[-1] - 0.05)
    stamp, power = samples[keep, 0], samples[keep, 1]
    best = None
    rows = []
    for lead_ms in np.arange(-10.0, 10.01, 0.5):
        for cover_ms in np.arange(1.0, 40.01, 1.0):
            hi = stamp + lead_ms / 1000
            share = busy_share(starts, ends, hi - cover_ms / 1000, hi)
            design = np.column_stack([np.ones_like(share), share])
            coef, *_ = np.linalg.lstsq(design, power, rcond=None)
            rms = float(np.sqrt(np.mean((design @ coef - power) ** 2)))
            rows.append((cover_ms, lead_ms, rms, coef[0], coef[0] + coef[1]))
            if best is None or rms < best[2]:
                best = rows[-1]
    print(f"{data['gpu']}, driver {data['driver']}: {len(stamp)} samples, {len(starts)} bursts of "
          f"{np.mean(ends - starts) * 1000:.2f} ms every {np.mean(np.diff(starts)) * 1000:.2f} ms")
    print(f"median sample interval {np.median(np.diff(stamp)) * 1000:.2f} ms")
    cover, lead, rms, idle, busy = best
    print(f"best: cover {cover:.0f} ms, stamp offset {lead:+.1f} ms (span ending that long after the stamp): "
          f"residual {rms:.1f} W, idle {idle:.0f} W, busy {busy:.0f} W")
    for c in (5, 10, 15, 20, 25):
        at = min((r for r in rows if r[0] == c), key=lambda r: r[2])
        print(f"  cover {c:2d} ms: best offset {at[1]:+.1f} ms, residual {at[2]:.1f} W")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--fit", action="store_true", help="fit a recorded file")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--burst-ms", type=float, default=10.0)
    parser.add_argument("--gap-ms", type=float, default=13.3)
    args = parser.parse_args()
    if args.fit:
        fit(args.out)
    else:
        record(args)
        fit(args.out)


if __name__ == "__main__":
    main()
