#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): if identical modules are fitted as one
(one power per phase for the whole group), how far is each from its
leave-one-out truth, against the fit that gives each its own power?
(issue 53, item 2: the GPT's blocks err by a fixed pattern, +-8% around
their mean, while their truths agree within ~2%.)

For stored runs of bench/gpu_attribution_real_truths.py (raw.json.gz,
result.json), finds the identical modules as a session does
(bench/probes/twin_spread.py), refits the run through joule.attribute_data
twice: as recorded, and with each group's regions renamed to one region per
phase. A tied module's energy a call is its own GPU time a call in each phase
times that phase's fitted power; its interval is the group total's, relative.
Prints per run and pooled, for the modules whose truth is >= 5% of the step: errors
(median, worst, how many within 5%) and intervals that hold, both ways.

  PYTHONPATH=build/python python3 bench/probes/twin_tying.py RUN_DIR [RUN_DIR ...]
"""
import argparse
import collections
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import joule  # noqa: E402
from joule.torch.regions import module_totals_of  # noqa: E402
from twin_spread import groups_of  # noqa: E402  (this folder's)

PHASES = ("forward", "backward")


def load(path):
    gz = os.path.join(path, "raw.json.gz")
    raw = json.load(gzip.open(gz) if os.path.exists(gz) else open(os.path.join(path, "raw.json")))
    result = json.load(open(os.path.join(path, "result.json")))
    r = result["sample_response"]
    response = joule.SampleResponse(r["response_ms"], r["first_lag_ms"], r.get("rounds", []),
                                    r.get("rounds_first_lag_ms", 0))
    return raw, result, response


def fit(raw, intervals, response, totals):
    return joule.attribute_data(raw["samples"], raw.get("counter", []), intervals, raw["begin_s"], raw["end_s"],
                                raw["energy_j"], bootstrap_rounds=200, sample_response=response, totals=totals)


def split(region):
    """("blocks.3", "forward") from "blocks.3.forward"; (region, None) for a region of no phase."""
    path, _, phase = region.rpartition(".")
    return (path, phase) if phase in PHASES else (region, None)


def time_per_call_s(intervals):
    """Per region: its recorded time a call (end - begin, mean over calls)."""
    spans = collections.defaultdict(list)
    for name, begin_s, end_s, *_ in intervals:
        spans[name].append(end_s - begin_s)
    return {name: statistics.fmean(s) for name, s in spans.items()}


def judged_rows(path, monitor):
    """(module, truth J, own estimate J, own interval, tied estimate J, tied interval) per module judged."""
    raw, result, response = load(path)
    truth = result["in_mix"]
    full_step_j = truth.get("_full_step_j")

    def share(row):  # the truth's share of the step where the full step was measured, else the estimate's
        return truth[row["region"]] / statistics.fmean(full_step_j) if full_step_j else row["default"]["share"]

    judged = {row["region"] for row in result["rows"] if share(row) >= 0.05}
    groups = [[name.removesuffix(".forward") for name in g] for g in groups_of(result["model"], monitor)]
    tied_name = {member: f"twins{k}" for k, g in enumerate(groups) for member in g}
    names = list(dict.fromkeys(v[0] for v in raw["intervals"]))
    own = fit(raw, raw["intervals"], response, module_totals_of(names) or None)

    def renamed(region):
        path_, phase = split(region)
        if path_ not in tied_name:
            return region
        return tied_name[path_] + (f".{phase}" if phase else "")

    tied_intervals = [[renamed(v[0])] + list(v[1:]) for v in raw["intervals"]]
    tied_names = list(dict.fromkeys(v[0] for v in tied_intervals))
    tied = fit(raw, tied_intervals, response, module_totals_of(tied_names) or None)
    seconds = time_per_call_s(raw["intervals"])
    training = bool(own.totals)
    own_of = {g.name.removesuffix(".forward"): g for g in (own.totals if training else own.regions)}
    tied_of = {g.name.removesuffix(".forward"): g for g in (tied.totals if training else tied.regions)}
    tied_power = {r.name: r.power_w for r in tied.regions}
    rows = []
    for module in sorted(judged & set(tied_name)):
        g, t = own_of[module], tied_of[tied_name[module]]
        phases = PHASES if training else ("forward",)
        # Powers are unscaled, energies scaled to the window's measured energy.
        estimate_j = tied.scale * sum(tied_power[f"{tied_name[module]}.{p}"] * seconds[f"{module}.{p}"] for p in phases)
        low, high = (e / t.calls / t.energy_per_call_j for e in (t.energy_low_j, t.energy_high_j))
        rows.append((module, truth[module], g.energy_per_call_j, (g.energy_low_j / g.calls, g.energy_high_j / g.calls),
                     estimate_j, (estimate_j * low, estimate_j * high)))
    return rows


def figures(rows, estimate, interval):
    errors = [r[estimate] / r[1] - 1 for r in rows]
    holds = sum(r[interval][0] <= r[1] <= r[interval][1] for r in rows)
    half = statistics.median((r[interval][1] - r[interval][0]) / 2 / r[estimate] for r in rows)
    return (f"median |error| {100 * statistics.median(abs(e) for e in errors):4.1f}%, worst "
            f"{100 * max(errors, key=abs):+5.1f}%, {sum(abs(e) <= 0.05 for e in errors)} of {len(rows)} within 5%, "
            f"{holds} intervals hold (median half-width {100 * half:.1f}%)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    monitor = joule.Monitor(backend="sim", sim="count=1")
    pooled = []
    for path in args.runs:
        rows = judged_rows(path, monitor)
        if not rows:
            print(f"{path}: no identical modules judged")
            continue
        pooled += rows
        print(path)
        for r in rows:
            print(f"  {r[0]:10s} truth {r[1]:7.3f} J  own {100 * (r[2] / r[1] - 1):+5.1f}%  tied {100 * (r[4] / r[1] - 1):+5.1f}%")
        print(f"  own:  {figures(rows, 2, 3)}")
        print(f"  tied: {figures(rows, 4, 5)}")
    if pooled:
        print(f"all {len(pooled)} modules, own:  {figures(pooled, 2, 3)}")
        print(f"all {len(pooled)} modules, tied: {figures(pooled, 4, 5)}")


if __name__ == "__main__":
    main()
