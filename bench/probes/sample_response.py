#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: how does a GPU's power data (what joule.attribute fits) respond
to a step in the GPU's power, on joule's own clocks? Changes no GPU setting.

Records with joule.torch.measure_sample_response (an elementwise chain
"high" against a near-idle spin "low", random lengths of 1-40 ms, edges on
the GPU's clock) and writes the window's power data
(Monitor.observed_power), its segments (RegionRecorder.intervals) and
joule's fitted response to OUT.json.

--fit (numpy, no GPU) refits the same data independently of joule's C++ fit:
each sample as
    p = low_w + sum_j c_j * (share of "high" in [stamp - (j+1) ms, stamp - j ms])
for j from -20 to 79 ms, unsmoothed: c_j / sum(c) is the samples' response
to a step, lag by lag, and sum(c) the high-low power difference. It prints
the response, its centre and width, and the residual, and the best boxcar.

Usage: sample_response.py OUT.json [--seconds 40]
       sample_response.py --fit OUT.json
"""
import argparse
import json


def record(args):
    import torch

    import joule
    import joule.torch

    monitor = joule.Monitor(interval_ms=100)
    raw = {}
    response = joule.torch.measure_sample_response(monitor, seconds=args.seconds, seed=args.seed, raw=raw, keep=False)
    data = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "response": response.to_dict(), **raw}
    with open(args.out, "w") as f:
        json.dump(data, f)
    print(f"{response!r}: {len(raw['samples'])} samples, {len(raw['intervals'])} intervals -> {args.out}")


def busy_share(intervals, begin, end, name="high", bins_per_ms=1):
    """Per bin of 1/bins_per_ms ms on [begin, end): the share of it inside `name` intervals."""
    import numpy as np

    edges = np.zeros(int((end - begin) * 1000 * bins_per_ms) + 2)
    for region, b, e, _ in intervals:
        if region != name:
            continue
        lo, hi = (b - begin) * 1000 * bins_per_ms, (e - begin) * 1000 * bins_per_ms
        i, j = int(lo), int(hi)
        if i == j:
            edges[i] += hi - lo
            continue
        edges[i] += i + 1 - lo
        edges[i + 1:j] += 1
        edges[j] += hi - j
    return edges


def fit(path, first_lag=-20, last_lag=79):
    import numpy as np

    data = json.load(open(path))
    begin = data["begin_s"]
    x = busy_share(data["intervals"], begin, data["end_s"])
    lags = np.arange(first_lag, last_lag + 1)
    rows, y = [], []
    for b, e, p in data["samples"]:
        stamp = int(round((e - begin) * 1000))
        idx = stamp - 1 - lags
        if idx.min() < 0 or idx.max() >= len(x):
            continue
        rows.append(np.concatenate(([1.0], x[idx])))
        y.append(p)
    A, y = np.array(rows), np.array(y)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    residual = y - A @ coef
    low, c = coef[0], coef[1:]
    total = c.sum()
    h = c / total
    centre = float((h * (lags + 0.5)).sum())
    cum = np.cumsum(h)
    q10, q50, q90 = (float(lags[np.searchsorted(cum, q)]) for q in (0.1, 0.5, 0.9))
    print(f"{data.get('gpu', 'GPU')}: {len(y)} samples, spans median {1e3 * np.median([e - b for b, e, _ in data['samples']]):.1f} ms")
    print(f"low {low:.1f} W, high {low + total:.1f} W; residual {residual.std():.1f} W rms (samples' std {y.std():.1f} W)")
    print(f"response centre {centre:.1f} ms before the stamp; 10/50/90% of it by {q10:.0f}/{q50:.0f}/{q90:.0f} ms")
    for lag, v in zip(lags, h):
        if abs(v) > 0.005:
            print(f"  lag {lag:3d} ms: {v:+.3f} {'#' * int(max(0, v) * 200)}")
    # The boxcar the attribution assumes, best cover and delay, for comparison.
    best = None
    for cover in range(1, 41):
        for delay in range(first_lag, 41):
            k = np.zeros(len(lags))
            k[(lags >= delay) & (lags < delay + cover)] = 1.0 / cover
            B = np.column_stack((np.ones(len(y)), A[:, 1:] @ k))
            cb, *_ = np.linalg.lstsq(B, y, rcond=None)
            rms = (y - B @ cb).std()
            if best is None or rms < best[0]:
                best = (rms, cover, delay, cb)
    rms, cover, delay, cb = best
    print(f"best boxcar: last {cover} ms, {delay} ms late: residual {rms:.1f} W rms, low {cb[0]:.1f} W, "
          f"high {cb[0] + cb[1]:.1f} W")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args()
    fit(args.out) if args.fit else record(args)


if __name__ == "__main__":
    main()
