#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): identical modules fitted with one power
per phase, as a joule.torch session now does, against the fit that gives
each its own power, judged by the stored leave-one-out truths. (issue 53,
item 2: the GPT's blocks err by a fixed pattern each on its own, +-8% around
their mean, while their truths agree within ~2%.)

For stored runs of bench/gpu_attribution_real_truths.py (raw.json.gz,
result.json), finds the identical modules as a session does
(bench/probes/twin_spread.py) and refits each run through
joule.attribute_data with joule's defaults (the measured response, the model
bias) twice: with same_power= as a session gives it
(joule.torch.twins.same_power_groups), and with tie_identical=False's
nothing. Prints per run and pooled, for the modules whose truth is >= 5% of
the step (a training run's modules by their forward + backward totals), the
tied ones and all: errors (median, worst, how many within 5%) and how many
90% intervals hold the truth, with their median half-width.

  PYTHONPATH=build/python python3 bench/probes/twin_tying.py RUN_DIR [RUN_DIR ...]
"""
import argparse
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import joule  # noqa: E402
from joule.torch.regions import module_totals_of  # noqa: E402
from joule.torch.twins import same_power_groups  # noqa: E402
from twin_spread import groups_of  # noqa: E402  (this folder's)


def load(path):
    gz = os.path.join(path, "raw.json.gz")
    raw = json.load(gzip.open(gz) if os.path.exists(gz) else open(os.path.join(path, "raw.json")))
    result = json.load(open(os.path.join(path, "result.json")))
    r = result["sample_response"]
    response = joule.SampleResponse(r["response_ms"], r["first_lag_ms"], r.get("rounds", []),
                                    r.get("rounds_first_lag_ms", 0))
    return raw, result, response


def judged(a):
    """A training run's module totals, else its regions, by module path."""
    return {g.name.removesuffix(".forward"): g for g in (a.totals or a.regions)}


def judged_rows(path, monitor):
    """(module, truth J, own fit, tied fit) per tied module with >= 5% of the step."""
    raw, result, response = load(path)
    truth = result["in_mix"]
    full_step_j = truth.get("_full_step_j")

    def share(row):  # the truth's share of the step where the full step was measured, else the estimate's
        return truth[row["region"]] / statistics.fmean(full_step_j) if full_step_j else row["default"]["share"]

    big = {row["region"] for row in result["rows"] if share(row) >= 0.05}
    same_power = same_power_groups(raw["intervals"], groups_of(result["model"], monitor))
    tied = {name.removesuffix(".forward").removesuffix(".backward") for names in same_power.values() for name in names}
    names = list(dict.fromkeys(v[0] for v in raw["intervals"]))

    def fit(**options):
        return judged(joule.attribute_data(raw["samples"], raw.get("counter", []), raw["intervals"], raw["begin_s"],
                                           raw["end_s"], raw["energy_j"], sample_response=response,
                                           totals=module_totals_of(names) or None, **options))

    own, as_one = fit(), fit(same_power=same_power)
    return [(module, truth[module], own[module], as_one[module], module in tied)
            for module in sorted(big & set(own) & set(truth))]


def figures(rows, k):
    fits = [(r[1], r[k]) for r in rows]
    errors = [g.energy_per_call_j / truth_j - 1 for truth_j, g in fits]
    holds = sum(g.energy_low_j <= truth_j * g.calls <= g.energy_high_j for truth_j, g in fits)
    half = statistics.median((g.energy_high_j - g.energy_low_j) / 2 / g.energy_j for _, g in fits)
    return (f"median |error| {100 * statistics.median(abs(e) for e in errors):4.1f}%, worst "
            f"{100 * max(errors, key=abs):+6.1f}%, {sum(abs(e) <= 0.05 for e in errors)} of {len(rows)} within 5%, "
            f"{holds} intervals hold (median half-width {100 * half:.1f}%)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    monitor = joule.Monitor(backend="sim", sim="count=1")
    pooled = []
    for path in args.runs:
        rows = judged_rows(path, monitor)
        print(path)
        pooled += rows
        for module, truth_j, own, as_one, tied in rows:
            print(f"  {module:10s} truth {truth_j:7.3f} J  own {100 * (own.energy_per_call_j / truth_j - 1):+6.1f}%  "
                  f"{'as one' if tied else 'alone '} {100 * (as_one.energy_per_call_j / truth_j - 1):+6.1f}%")
        tied_rows = [r for r in rows if r[4]]
        if tied_rows:
            print(f"  tied modules, own:    {figures(tied_rows, 2)}")
            print(f"  tied modules, as one: {figures(tied_rows, 3)}")
    for what, rows in (("tied modules", [r for r in pooled if r[4]]), ("every module with >= 5%", pooled)):
        if rows:
            print(f"{what}, {len(rows)} in all, own:    {figures(rows, 2)}")
            print(f"{what}, {len(rows)} in all, as one: {figures(rows, 3)}")


if __name__ == "__main__":
    main()
