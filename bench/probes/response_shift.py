#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (numpy, no GPU): is an attribution's error a matter of the
samples' timing? Refits a proof run (bench/gpu_attribution_proof.py's
raw.json and result.json) with the measured response moved earlier or later
by up to 1 ms in 0.1 ms steps, independently of joule's C++ fit:

    sample = sum_r q_r * (response-weighted share of region r before the stamp)

(regions and the idle time as columns, 0.1 ms bins). It prints the residual
for each shift (how well the data place the response), the shift the data
prefer, and for each region the energy per call at shift 0 and at the
preferred shift against the truth in the mix, with two 90% block-bootstrap
intervals (1 s blocks, 200 rounds): the shift held at 0, and the shift refitted
in every round (so the timing's uncertainty is in the interval).
On the H200 and H100 runs of 2026-11-26 the data place the response within
+-0.2 ms and the profiled intervals miss the same truths: the errors left are
not the response's timing.
Usage: response_shift.py RUN_DIR [RUN_DIR ...]   (e.g. bench/results/2026-11-26-h100-attribution-proof/proof)
"""
import json
import sys

import numpy as np

from sample_response import busy_share  # this folder's

BINS_PER_MS = 10
SHIFTS = np.arange(-10, 11)  # in bins: -1.0 .. +1.0 ms (+: the response sits later before the stamp)


def share_columns(intervals, begin_s, end_s):
    """Per region (sorted names) and the idle time: the share of each bin it ran."""
    names = sorted({r for r, *_ in intervals})
    cols = [busy_share(intervals, begin_s, end_s, n, BINS_PER_MS) for n in names]
    return names, np.array(cols + [np.clip(1 - sum(cols), 0, 1)])


class Run:
    def __init__(self, path):
        raw = json.load(open(f"{path}/raw.json"))
        result = json.load(open(f"{path}/result.json"))
        self.truth = result["in_mix"]
        response = result["sample_response"]
        self.begin_s, self.energy_j = raw["begin_s"], raw["energy_j"]
        self.names, cols = share_columns(raw["intervals"], self.begin_s, raw["end_s"])
        bins = cols.shape[1]
        self.seconds = cols.sum(axis=1) / (1e3 * BINS_PER_MS)
        self.steps = sum(1 for r, _, _, resumed in raw["intervals"] if r == self.names[0] and not resumed)
        kernel = np.repeat(np.array(response["response_ms"]) / BINS_PER_MS, BINS_PER_MS)
        kernel /= kernel.sum()
        convolved = np.array([np.convolve(c, kernel)[:bins] for c in cols])  # [r, s] = sum_k kernel[k] col[s - k]
        stamps = np.array([(e - self.begin_s) * 1e3 * BINS_PER_MS for _, e, _ in raw["samples"]])
        power = np.array([p for _, _, p in raw["samples"]])
        newest = response["first_lag_ms"] * BINS_PER_MS
        index = [np.round(stamps).astype(int) - 1 - newest - d for d in SHIFTS]
        keep = np.logical_and.reduce([(i - len(kernel) >= 0) & (i < bins) for i in index])
        blocks = (stamps[keep] / (1e3 * BINS_PER_MS)).astype(int)
        self.blocks = blocks.max() + 1
        y = power[keep]
        self.sums = []  # per shift: each 1 s block's X'X, X'y, y'y
        for i in index:
            x = convolved[:, np.clip(i[keep], 0, bins - 1)].T
            xtx = np.array([x[blocks == b].T @ x[blocks == b] for b in range(self.blocks)])
            xty = np.array([x[blocks == b].T @ y[blocks == b] for b in range(self.blocks)])
            yty = np.array([y[blocks == b] @ y[blocks == b] for b in range(self.blocks)])
            self.sums.append((xtx, xty, yty))
        self.samples = int(keep.sum())

    def fit(self, weights, shift):
        xtx, xty, yty = self.sums[shift]
        a, b = np.tensordot(weights, xtx, 1), weights @ xty
        beta = np.linalg.lstsq(a, b, rcond=None)[0]
        return beta, weights @ yty - 2 * beta @ b + beta @ a @ beta

    def energies_per_call(self, beta):
        parts = beta * self.seconds
        return parts[:-1] * self.energy_j / parts.sum() / self.steps


def report(path, rounds=200, seed=1):
    run = Run(path)
    ones = np.ones(run.blocks)
    fits = [run.fit(ones, s) for s in range(len(SHIFTS))]
    zero, best = list(SHIFTS).index(0), int(np.argmin([rss for _, rss in fits]))
    print(f"{path}: {run.samples} samples, {run.steps} steps")
    print("  residual rms by shift (ms: W): " + " ".join(
        f"{SHIFTS[s] / BINS_PER_MS:+.1f}: {np.sqrt(fits[s][1] / run.samples):.2f}" for s in range(0, len(SHIFTS), 2)))
    rng = np.random.default_rng(seed)
    held, profiled, chosen = [], [], []
    for _ in range(rounds):
        w = np.bincount(rng.integers(0, run.blocks, run.blocks), minlength=run.blocks).astype(float)
        held.append(run.energies_per_call(run.fit(w, zero)[0]))
        round_fits = [run.fit(w, s) for s in range(len(SHIFTS))]
        s = int(np.argmin([rss for _, rss in round_fits]))
        chosen.append(SHIFTS[s] / BINS_PER_MS)
        profiled.append(run.energies_per_call(round_fits[s][0]))
    held, profiled = np.array(held), np.array(profiled)
    lo, mid, hi = np.percentile(chosen, [5, 50, 95])
    print(f"  preferred shift {SHIFTS[best] / BINS_PER_MS:+.1f} ms; over the rounds {lo:+.1f} / {mid:+.1f} / {hi:+.1f} ms")
    at_zero, at_best = run.energies_per_call(fits[zero][0]), run.energies_per_call(fits[best][0])
    for i, name in enumerate(run.names):
        key = name[:-len(".forward")] if name.endswith(".forward") else name
        truth = run.truth[key]
        intervals = []
        for rows in (held, profiled):
            low, high = np.percentile(rows[:, i], [5, 95])
            intervals.append(f"[{low:.3f}, {high:.3f}] {'in' if low <= truth <= high else 'OUT'}")
        print(f"  {key:13s} truth {truth:.3f} J | shift 0: {at_zero[i]:.3f} ({100 * (at_zero[i] / truth - 1):+.1f}%) "
              f"{intervals[0]} | preferred: {at_best[i]:.3f} ({100 * (at_best[i] / truth - 1):+.1f}%) "
              f"shift refitted {intervals[1]}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for run_dir in sys.argv[1:]:
        report(run_dir)
