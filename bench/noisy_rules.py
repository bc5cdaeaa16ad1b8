#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Studies a two-stage decision rule for noise-aware power-limit profiling offline.

Input: the CSV of `joule_bench_noisy_profiling --screening-rounds R --dump FILE` (every candidate
visited in each of R rounds; one row per stretch with the candidate's true cost against the best).
Rule: screen every candidate for R1 rounds, pick the lowest 3-point running mean of the
stall-adjusted cost, confirm the pick against the baseline over the next R2 rounds with one
one-sided t test (95%) on the pick's confirming visits only. Prints how often the choice's true
cost is within 1% of the optimum.

usage: noisy_rules.py DUMP.csv R1 R2 [OBJECTIVE]   (OBJECTIVE: cost(eta=0.5) or energy)
"""
import collections
import csv
import math
import statistics as st
import sys

PRICE_W, ETA = 700.0, 0.5


def load(path, objective):
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    truth = collections.defaultdict(dict)
    for r in csv.DictReader(open(path)):
        if r["objective"] != objective:
            continue
        seed, setting = int(r["seed"]), float(r["setting"])
        runs[seed][setting].append((int(r["visit"]), float(r["time_s"]), float(r["energy_j"]), float(r["fast_s"])))
        truth[seed][setting] = float(r["true_cost_vs_best"])
    return runs, truth


def visits(stretches):
    """Each visit's mean time, energy and fast-step time, in visit order."""
    by_visit = collections.defaultdict(list)
    for visit, t, e, f in stretches:
        by_visit[visit].append((t, e, f))
    return [tuple(sum(x[k] for x in by_visit[v]) / len(by_visit[v]) for k in range(3)) for v in sorted(by_visit)]


def t_quantile_95(df):
    z = 1.645  # Cornish-Fisher, as src/optimize/noisy_choice.cc
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)


def stall_adjusted(per, chosen_visits, cost):
    """Each candidate's visit costs with the stall (time beyond the fast steps) regressed out."""
    data = {s: [per[s][i] for i in chosen_visits[s]] for s in chosen_visits}
    mean_stall = st.mean(t - f for vs in data.values() for t, e, f in vs)
    sxy = sxx = 0.0
    for vs in data.values():
        costs = [cost(t, e) for t, e, f in vs]
        c_mean, t_mean, x_mean = st.mean(costs), st.mean(v[0] for v in vs), st.mean(t - f for t, e, f in vs)
        for c, (t, e, f) in zip(costs, vs):
            sxy += (c / c_mean - 1) * (t - f - x_mean) / t_mean
            sxx += ((t - f - x_mean) / t_mean) ** 2
    beta = sxy / sxx if sxx > 0 else 0.0
    out = {}
    for s, vs in data.items():
        costs = [cost(t, e) for t, e, f in vs]
        c_mean, t_mean = st.mean(costs), st.mean(v[0] for v in vs)
        out[s] = [c - beta * c_mean * (t - f - mean_stall) / t_mean for c, (t, e, f) in zip(costs, vs)]
    return out


def main():
    path, r1, r2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    objective = sys.argv[4] if len(sys.argv) > 4 else "cost(eta=0.5)"
    if objective.startswith("cost"):
        cost = lambda t, e: ETA * e + (1 - ETA) * PRICE_W * t
    else:
        cost = lambda t, e: e
    runs, truth = load(path, objective)
    within = moved = 0
    for seed, stretches in runs.items():
        per = {s: visits(x) for s, x in stretches.items()}
        if min(len(v) for v in per.values()) < r1 + r2:
            sys.exit(f"seed {seed}: fewer than {r1 + r2} rounds in the dump")
        base = max(per)
        screened = stall_adjusted(per, {s: range(r1) for s in per}, cost)
        order = sorted(per)
        means = {s: st.mean(screened[s]) for s in order}
        smooth = {s: st.mean(means[order[j]] for j in range(max(0, i - 1), min(len(order), i + 2)))
                  for i, s in enumerate(order)}
        pick = min((s for s in order if s != base), key=lambda s: smooth[s])
        confirmed = stall_adjusted(per, {base: range(r1 + r2), pick: range(r1, r1 + r2)}, cost)
        b, p = confirmed[base], confirmed[pick]
        pooled = ((len(b) - 1) * st.variance(b) + (len(p) - 1) * st.variance(p)) / (len(b) + len(p) - 2)
        se = math.sqrt(pooled * (1 / len(b) + 1 / len(p)))
        choice = pick if st.mean(b) - st.mean(p) > t_quantile_95(len(b) + len(p) - 3) * se else base
        moved += choice != base
        within += truth[seed][choice] <= 1.01
    print(f"{objective} screening {r1} rounds, confirming {r2}: within 1% of the optimum {within}/{len(runs)}, "
          f"moved {moved}")


if __name__ == "__main__":
    main()
