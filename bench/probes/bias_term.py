#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (numpy, no GPU): can the data estimate the attribution model's own
bias? (issue 53, item 1: intervals that hold.)

joule's attribution takes each region's power as one constant. A GPU's power
moves within a region (a matmul ramps up after a spin, the power limit pulls
it back), and the samples, which respond over ~25 ms, see each region through
its neighbours: where the constant is wrong, the fit hands the error to
whichever region the samples confuse it with. Refitting the same data with a
richer shape per region (each call cut into PARTS equal pieces, each piece
its own power) moves a region's energy by about what that shape costs the
constant model. This refits a proof run (bench/gpu_attribution_proof.py's
raw.json and result.json, with its measured response) both ways and prints,
per region: the truth in the mix, the constant model's energy per call and
its 90% block-bootstrap interval (1 s blocks), the split model's, their
difference, and whether the truth lies inside the interval widened by that
difference (in quadrature and added).

Usage: bias_term.py [--parts K | --merge A+B] RUN_DIR [RUN_DIR ...]
  --merge sleep+launch_storm: the two fitted as one region (one power), the
  others' errors and intervals against the same fit with every region its own
  e.g. bench/results/2026-11-26-h200-attribution-proof/proof-response
"""
import argparse
import json

import numpy as np

from sample_response import busy_share  # this folder's

BINS_PER_MS = 10


def part_intervals(intervals, name, part, parts):
    """The name's intervals cut into `parts` equal pieces, piece `part` of each."""
    out = []
    for region, b, e, resumed in intervals:
        if region == name:
            width = (e - b) / parts
            out.append((name, b + part * width, b + (part + 1) * width, resumed))
    return out


class Run:
    def __init__(self, path, parts, stretch=1.0):
        raw = json.load(open(f"{path}/raw.json"))
        result = json.load(open(f"{path}/result.json"))
        self.truth = result["in_mix"]
        response = result["sample_response"]
        begin, end = raw["begin_s"], raw["end_s"]
        self.energy_j = raw["energy_j"]
        self.names = sorted({r for r, *_ in raw["intervals"]})
        self.steps = sum(1 for r, _, _, resumed in raw["intervals"] if r == self.names[0] and not resumed)
        # Columns: every region's PARTS pieces, then the idle time.
        cols = [busy_share(part_intervals(raw["intervals"], n, k, parts), begin, end, n, BINS_PER_MS)
                for n in self.names for k in range(parts)]
        cols = np.array(cols + [np.clip(1 - sum(cols), 0, 1)])
        self.parts = parts
        self.seconds = cols.sum(axis=1) / (1e3 * BINS_PER_MS)
        bins = cols.shape[1]
        kernel = np.repeat(np.array(response["response_ms"]) / BINS_PER_MS, BINS_PER_MS)
        if stretch != 1.0:  # the same shape over stretch times the lags (about the stamp)
            lag_ms = response["first_lag_ms"] + np.arange(len(kernel)) / BINS_PER_MS
            kernel = np.interp(lag_ms / stretch, lag_ms, kernel, left=0.0, right=0.0)
        kernel /= kernel.sum()
        convolved = np.array([np.convolve(c, kernel)[:bins] for c in cols])
        stamps = np.array([(e - begin) * 1e3 * BINS_PER_MS for _, e, _ in raw["samples"]])
        power = np.array([p for _, _, p in raw["samples"]])
        index = np.round(stamps).astype(int) - 1 - response["first_lag_ms"] * BINS_PER_MS
        keep = (index - len(kernel) >= 0) & (index < bins)
        blocks = (stamps[keep] / (1e3 * BINS_PER_MS)).astype(int)
        self.blocks = blocks.max() + 1
        x, y = convolved[:, index[keep]].T, power[keep]
        self.xtx = np.array([x[blocks == b].T @ x[blocks == b] for b in range(self.blocks)])
        self.xty = np.array([x[blocks == b].T @ y[blocks == b] for b in range(self.blocks)])
        self.yty, self.samples = float(y @ y), len(y)
        self.yty_blocks = np.array([y[blocks == b] @ y[blocks == b] for b in range(self.blocks)])

    def fit_rss(self, weights):
        """Energies per call (one power per region) and the weighted residual sum of squares."""
        a, b = np.tensordot(weights, self.xtx, 1), weights @ self.xty
        beta = np.linalg.lstsq(a, b, rcond=None)[0]
        return beta, weights @ self.yty_blocks - 2 * beta @ b + beta @ a @ beta

    def residual_rms_w(self):
        """Of the constant model over every sample."""
        a, b = self.xtx.sum(axis=0), self.xty.sum(axis=0)
        beta = np.linalg.lstsq(a, b, rcond=None)[0]
        return float(np.sqrt(max(0.0, self.yty - 2 * beta @ b + beta @ a @ beta) / self.samples))

    def per_call(self, weights, merge):
        """Energy per call per region; merge: the regions' pieces share one power."""
        a, b = np.tensordot(weights, self.xtx, 1), weights @ self.xty
        if merge:  # the constant model: one column per region (pieces summed)
            k = len(self.names)
            m = np.zeros((k * self.parts + 1, k + 1))
            for r in range(k):
                m[r * self.parts:(r + 1) * self.parts, r] = 1
            m[-1, -1] = 1
            beta = m @ np.linalg.lstsq(m.T @ a @ m, m.T @ b, rcond=None)[0]
        else:
            beta = np.linalg.lstsq(a, b, rcond=None)[0]
        parts = beta * self.seconds
        regions = parts[:-1].reshape(len(self.names), self.parts).sum(axis=1)
        return regions * self.energy_j / parts.sum() / self.steps


def report(path, parts, stretch=1.0, rounds=200, seed=1):
    run = Run(path, parts)
    ones = np.ones(run.blocks)
    constant = run.per_call(ones, True)
    # The other model: a richer shape per region, or (--stretch) the response
    # stretched in time, with one constant per region.
    split = run.per_call(ones, False) if stretch == 1.0 else Run(path, parts, stretch).per_call(ones, True)
    rng = np.random.default_rng(seed)
    boot = np.array([run.per_call(np.bincount(rng.integers(0, run.blocks, run.blocks), minlength=run.blocks)
                                  .astype(float), True) for _ in range(rounds)])
    truths = {n: run.truth[n.removesuffix(".forward")] for n in run.names}
    step_j = sum(truths.values())
    print(f"{path}: {run.steps} steps, {parts} pieces a call; the truths in the mix sum to "
          f"{100 * step_j / (run.energy_j / run.steps):.1f}% of the step")
    counts = {"interval": 0, "quadrature": 0, "added": 0, "n": 0}
    for i, name in enumerate(run.names):
        truth = truths[name]
        low, high = np.percentile(boot[:, i], [5, 95])
        bias = abs(split[i] - constant[i])
        half = 0.5 * (high - low)
        mid = 0.5 * (high + low)
        quad = np.hypot(half, bias)
        share = constant[i] * run.steps / run.energy_j
        verdicts = [low <= truth <= high, abs(truth - mid) <= quad, abs(truth - mid) <= half + bias]
        if share >= 0.05:
            counts["n"] += 1
            for key, ok in zip(("interval", "quadrature", "added"), verdicts):
                counts[key] += ok
        print(f"  {name.removesuffix('.forward'):13s} {100 * share:5.1f}% truth {truth:.3f} J | constant "
              f"{constant[i]:.3f} ({100 * (constant[i] / truth - 1):+5.1f}%) [{low:.3f}, {high:.3f}] "
              f"{'in ' if verdicts[0] else 'OUT'} | split {split[i]:.3f} ({100 * (split[i] / truth - 1):+5.1f}%) | "
              f"widened +-{quad:.3f} {'in ' if verdicts[1] else 'OUT'} / +-{half + bias:.3f} "
              f"{'in' if verdicts[2] else 'OUT'}")
    return counts


def profile_stretch(path, stretches):
    """Does the window's own data prefer another time scale of the response?"""
    print(f"{path}: the response stretched about its stamp, one power per region")
    truth = None
    for stretch in stretches:
        run = Run(path, 1, stretch)
        truth = truth or {n: run.truth[n.removesuffix(".forward")] for n in run.names}
        per_call = run.per_call(np.ones(run.blocks), True)
        errors = " ".join(f"{n.removesuffix('.forward')} {100 * (e / truth[n] - 1):+5.1f}%"
                          for n, e in zip(run.names, per_call) if e * run.steps / run.energy_j >= 0.05)
        print(f"  x{stretch:.2f}: residual {run.residual_rms_w():6.2f} W | {errors}")


def profiled(path, stretches, rounds=200, seed=1):
    """The response's time scale refitted in every bootstrap round (the
    least residual over the stretches): a 90% interval that carries how
    loosely the window's data hold that scale. Returns the regions' counts."""
    runs = [Run(path, 1, s) for s in stretches]
    base = runs[stretches.index(1.0)]
    truth = {n: base.truth[n.removesuffix(".forward")] for n in base.names}
    rng = np.random.default_rng(seed)
    rows, chosen = [], []
    for _ in range(rounds):
        w = np.bincount(rng.integers(0, base.blocks, base.blocks), minlength=base.blocks).astype(float)
        fits = [r.fit_rss(w) for r in runs]
        k = int(np.argmin([rss for _, rss in fits]))
        chosen.append(stretches[k])
        parts = fits[k][0] * runs[k].seconds
        rows.append(parts[:-1] * base.energy_j / parts.sum() / base.steps)
    rows = np.array(rows)
    at_one = base.per_call(np.ones(base.blocks), True)
    lo, mid, hi = np.percentile(chosen, [5, 50, 95])
    print(f"{path}: stretch chosen over the rounds {lo:.3f} / {mid:.3f} / {hi:.3f}")
    inside = n = 0
    for i, name in enumerate(base.names):
        share = at_one[i] * base.steps / base.energy_j
        low, high = np.percentile(rows[:, i], [5, 95])
        ok = low <= truth[name] <= high
        if share >= 0.05:
            n += 1
            inside += ok
        print(f"  {name.removesuffix('.forward'):13s} {100 * share:5.1f}% truth {truth[name]:.3f} | x1: "
              f"{at_one[i]:.3f} ({100 * (at_one[i] / truth[name] - 1):+5.1f}%) | profiled 90% [{low:.3f}, {high:.3f}] "
              f"(+-{50 * (high - low) / at_one[i]:.1f}%) {'in' if ok else 'OUT'}")
    return inside, n


def merged(path, group, rounds=200, seed=1):
    """The constant model with the regions of `group` sharing one power (one
    column: a region too short for the response to resolve, joined to its
    neighbour), against the same fit with every region its own: the other
    regions' errors against their truths, and whether each truth lies in its
    90% block-bootstrap interval. Returns (inside, n) for the regions with
    >= 5% of the energy in the merged fit (the group counted as one)."""
    run = Run(path, 1)
    names = [n.removesuffix(".forward") for n in run.names]
    missing = [g for g in group if g not in names]
    if missing:
        raise SystemExit(f"{path}: no region {', '.join(missing)} (regions: {', '.join(names)})")
    columns = [n for n in names if n not in group] + ["+".join(group)]
    m = np.zeros((len(names) + 1, len(columns) + 1))
    for r, n in enumerate(names):
        m[r, columns.index("+".join(group) if n in group else n)] = 1
    m[-1, -1] = 1

    def per_call(weights, mapping):
        a, b = np.tensordot(weights, run.xtx, 1), weights @ run.xty
        beta = mapping @ np.linalg.lstsq(mapping.T @ a @ mapping, mapping.T @ b, rcond=None)[0]
        parts = beta * run.seconds
        energy = parts[:-1] * run.energy_j / parts.sum() / run.steps
        return np.array([energy[[r for r, n in enumerate(names) if n in c.split("+")]].sum() for c in columns])

    rng = np.random.default_rng(seed)
    draws = [np.bincount(rng.integers(0, run.blocks, run.blocks), minlength=run.blocks).astype(float)
             for _ in range(rounds)]
    fits = {}
    for label, mapping in (("each its own", np.eye(len(names) + 1)), ("merged", m)):
        boot = np.array([per_call(w, mapping) for w in draws])
        fits[label] = (per_call(np.ones(run.blocks), mapping), *np.percentile(boot, [5, 95], axis=0))
    print(f"{path}: {'+'.join(group)} as one region")
    inside = n = 0
    for i, c in enumerate(columns):
        truth = sum(run.truth[x] for x in c.split("+"))
        cells = []
        for label, (est, low, high) in fits.items():
            ok = low[i] <= truth <= high[i]
            cells.append(f"{label} {est[i]:.3f} ({100 * (est[i] / truth - 1):+6.1f}%) [{low[i]:.3f}, {high[i]:.3f}] "
                         f"{'in ' if ok else 'OUT'}")
        share = fits["merged"][0][i] * run.steps / run.energy_j
        if share >= 0.05:
            n += 1
            inside += fits["merged"][1][i] <= truth <= fits["merged"][2][i]
        print(f"  {c:20s} {100 * share:5.1f}% truth {truth:.3f} | " + " | ".join(cells))
    return inside, n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--stretch", type=float, default=1.0,
                        help="compare with the response stretched this much in time instead of with pieces")
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--profiled", action="store_true",
                        help="instead: intervals with the response's time scale refitted in every bootstrap round")
    parser.add_argument("--profile-stretch", action="store_true",
                        help="instead: the residual and the errors for the response stretched 0.85-1.15x")
    parser.add_argument("--merge", default=None, metavar="A+B",
                        help="instead: the regions A and B (and more, joined by +) fitted as one")
    args = parser.parse_args()
    if args.merge:
        inside = n = 0
        for path in args.runs:
            i, k = merged(path, args.merge.split("+"))
            inside, n = inside + i, n + k
        print(f"regions with >= 5% of the energy, merged: truth inside the 90% interval {inside}/{n}")
        return
    if args.profiled:
        inside = n = 0
        for path in args.runs:
            i, k = profiled(path, [0.9, 0.925, 0.95, 0.975, 1.0, 1.025, 1.05, 1.075, 1.1])
            inside, n = inside + i, n + k
        print(f"regions with >= 5% of the energy: truth inside the profiled interval {inside}/{n}")
        return
    if args.profile_stretch:
        for path in args.runs:
            profile_stretch(path, [0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15])
        return
    total = {"interval": 0, "quadrature": 0, "added": 0, "n": 0}
    for path in args.runs:
        for key, value in report(path, args.parts, args.stretch).items():
            total[key] += value
    n = total["n"]
    print(f"regions with >= 5% of the energy: {n}; truth inside: bootstrap interval {total['interval']}/{n}, "
          f"widened in quadrature {total['quadrature']}/{n}, widened by the sum {total['added']}/{n}")


if __name__ == "__main__":
    main()
