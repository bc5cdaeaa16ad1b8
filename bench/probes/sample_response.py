#!/usr/bin/env python3
"""Read-only: how does a GPU's power data (what joule.attribute fits) respond
to a step in the GPU's power, on joule's own clocks? Changes no GPU setting.

The GPU alternates "high" (back-to-back bf16 matmuls) and "low" (a
torch.cuda._sleep spin) segments of random lengths (1-40 ms each, so the
sequence has no period to alias with the driver's sampling), recorded as
regions through joule.torch.GpuClock (CUDA events mapped to the monitor's
clock). The monitor's power data for the window (Monitor.observed_power) and
the segments (RegionRecorder.intervals) are written to OUT.json.

--fit (numpy, no GPU) then fits each sample as
    p = low_w + sum_j c_j * (share of "high" in [stamp - (j+1) ms, stamp - j ms])
for j from -20 to 79 ms: c_j / sum(c) is the samples' response to a step,
lag by lag, whatever its shape (a boxcar of the last C ms, a delay, a slow
filter), and sum(c) the high-low power difference. It prints the response,
its centre and width, and the residual, and compares the boxcar the
attribution assumes.

Usage: sample_response.py OUT.json [--seconds 40]
       sample_response.py --fit OUT.json
"""
import argparse
import json
import random


def record(args):
    import torch

    import joule
    import joule.torch

    torch.cuda.init()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)
    for _ in range(10):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        torch.matmul(a, b, out=out)
    end.record()
    end.synchronize()
    matmul_ms = start.elapsed_time(end) / 50
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    cycles_per_ms = 10_000_000 / start.elapsed_time(end)
    print(f"matmul {matmul_ms:.3f} ms, spin {cycles_per_ms:.0f} cycles/ms", flush=True)

    rng = random.Random(args.seed)
    monitor = joule.Monitor(interval_ms=100)
    recorder = joule.RegionRecorder(monitor)
    edges = joule.torch.GpuClock(recorder)
    segments = 0
    with monitor.window("response") as w:
        import time
        until = time.perf_counter() + args.seconds
        while time.perf_counter() < until:
            edges.begin("high")
            for _ in range(max(1, round(rng.uniform(1, 40) / matmul_ms))):
                torch.matmul(a, b, out=out)
            edges.end("high")
            edges.begin("low")
            torch.cuda._sleep(int(rng.uniform(1, 40) * cycles_per_ms))
            edges.end("low")
            segments += 1
        torch.cuda.synchronize()
    edges.flush()
    m = monitor.settle(w.measurement, timeout_s=5.0)
    data = {
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "matmul_ms": matmul_ms,
        "segments": segments, "settled": m.settled, "begin_s": m.begin_s, "end_s": m.end_s,
        "energy_j": m.gpu_energy_j[0], "clock_uncertainty_s": edges.uncertainty_s, "drift_ppm": edges.drift_ppm,
        "samples": monitor.observed_power(0, m.begin_s, m.end_s),
        "intervals": recorder.intervals(m.begin_s, m.end_s),
    }
    with open(args.out, "w") as f:
        json.dump(data, f)
    print(f"{segments} segment pairs, {len(data['samples'])} samples, {len(data['intervals'])} intervals -> {args.out}")


def busy_share(intervals, begin, end, name="high"):
    """Per ms bin on [begin, end): the share of it inside `name` intervals."""
    import numpy as np

    edges = np.zeros(int((end - begin) * 1000) + 2)
    for region, b, e, _ in intervals:
        if region != name:
            continue
        lo, hi = (b - begin) * 1000, (e - begin) * 1000
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
    print(f"{data['gpu']}: {len(y)} samples, spans median {1e3 * np.median([e - b for b, e, _ in data['samples']]):.1f} ms")
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
