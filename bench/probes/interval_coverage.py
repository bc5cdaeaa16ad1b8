#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): do the attribution's intervals hold the
truth, and what model bias makes them? (issue 53, item 1.)

Refits proof runs (bench/gpu_attribution_proof.py's raw.json and result.json:
the samples, the regions, the measured response, the leave-one-out truths in
the mix) through joule.attribute_data with the statistical interval alone
(model_bias=0), and for every region with >= 5% of the energy prints the
error against its truth and whether the interval holds it. Then:

- the window's own segments: the same run fitted in --segments parts; their
  spread is what the run's data could say about a bias that moves;
- the model bias: per region the part of its squared relative error that the
  statistical interval does not explain, pooled (the root of the mean), and
  left out one run at a time: each run's regions judged with the bias pooled
  from the other runs alone, the interval widened in quadrature as joule
  does (SampleModel::model_bias). Prints that coverage and the intervals'
  median half-width.

  PYTHONPATH=build/python python3 bench/probes/interval_coverage.py RUN_DIR [RUN_DIR ...]
"""
import argparse
import gzip
import json
import os
import math
import statistics

import joule
from joule.torch.regions import module_totals_of

Z90 = 1.6448536269514722  # the two-sided 90% interval of a normal
DEFAULT_BIAS = 0.075  # joule's kProofModelBias (include/joule/attribution/window.h)


def module_totals(raw):
    """Training runs (regions in both phases): each module's forward and backward as a session
    totals them (joule.torch.regions.module_totals_of), as gpu_attribution_real_truths.py --train
    judges them; None for forward-only runs."""
    return module_totals_of(dict.fromkeys(v[0] for v in raw["intervals"])) or None


def refit(raw, response, begin_s, end_s, energy_j, rounds, model_bias=0.0):
    return joule.attribute_data(raw["samples"], raw.get("counter", []), raw["intervals"], begin_s, end_s, energy_j,
                                bootstrap_rounds=rounds, sample_response=response, model_bias=model_bias,
                                totals=module_totals(raw))


def judged(a):
    """What a run is judged by: its module totals where it has them, else its regions."""
    return a.totals if a.totals else a.regions


def path_of(region_name):
    """The module path of a "<path>.forward" region (the proofs' regions are forward only)."""
    return region_name[:-len(".forward")] if region_name.endswith(".forward") else region_name


def sampled_energy_j(raw, begin_s, end_s):
    return sum(w * max(0.0, min(t1, end_s) - max(t0, begin_s)) for t0, t1, w in raw["samples"])


class Row:
    """A region with >= 5% of the energy in one run, per call: the estimate,
    its statistical interval, joule's interval with its default model bias,
    the truth, and the segments' spread."""

    def __init__(self, name, g, default, truth_j, seg_sd):
        self.name, self.truth_j, self.seg_sd = name, truth_j, seg_sd
        self.est = g.energy_per_call_j
        self.low, self.high = g.energy_low_j / g.calls, g.energy_high_j / g.calls
        self.default_low, self.default_high = default.energy_low_j / g.calls, default.energy_high_j / g.calls
        self.err = self.est / truth_j - 1

    def holds(self, bias=0.0):
        """The truth inside the statistical interval widened by `bias` (1 sigma, relative) as joule does."""
        more = Z90 * bias * abs(self.est)
        low = self.est - math.hypot(self.est - self.low, more)
        high = self.est + math.hypot(self.high - self.est, more)
        return low <= self.truth_j <= high, (high - low) / 2 / self.est


def run_rows(path, segments):
    """The Rows of one run."""
    gz = os.path.join(path, "raw.json.gz")
    raw = json.load(gzip.open(gz) if os.path.exists(gz) else open(os.path.join(path, "raw.json")))
    result = json.load(open(f"{path}/result.json"))
    r = result["sample_response"]
    response = joule.SampleResponse(r["response_ms"], r["first_lag_ms"], r.get("rounds", []),
                                    r.get("rounds_first_lag_ms", 0))
    truth = result["in_mix"]
    full = refit(raw, response, raw["begin_s"], raw["end_s"], raw["energy_j"], 200)
    default = refit(raw, response, raw["begin_s"], raw["end_s"], raw["energy_j"], 200, model_bias=None)
    whole_j = sampled_energy_j(raw, raw["begin_s"], raw["end_s"])
    span_s = (raw["end_s"] - raw["begin_s"]) / segments
    parts = []
    for k in range(segments):
        b = raw["begin_s"] + k * span_s
        energy_j = raw["energy_j"] * sampled_energy_j(raw, b, b + span_s) / whole_j
        parts.append(refit(raw, response, b, b + span_s, energy_j, 0))
    full_step_j = truth.get("_full_step_j")

    def share(name):  # the truth's share of the step where the full step was measured, else the estimate's
        if full_step_j:
            return truth[name] / statistics.fmean(full_step_j)
        return next(g.share for g in judged(full) if path_of(g.name) == name)

    rows = []
    for g in judged(full):
        name = path_of(g.name)
        if name not in truth or share(name) < 0.05 or not g.resolved:
            continue
        seg = [next(x for x in judged(p) if x.name == g.name).energy_per_call_j for p in parts]
        with_bias = next(x for x in judged(default) if x.name == g.name)
        rows.append(Row(name, g, with_bias, truth[name], statistics.stdev(seg) / g.energy_per_call_j))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--segments", type=int, default=4)
    args = p.parse_args()
    runs = {path: run_rows(path, args.segments) for path in args.runs}
    rows = [row for rs in runs.values() for row in rs]
    for path, rs in runs.items():
        print(path)
        for row in rs:
            holds, half = row.holds()
            default = row.default_low <= row.truth_j <= row.default_high
            print(f"  {row.name:12s} error {100 * row.err:+6.1f}%  statistical 90% +-{100 * half:4.1f}% "
                  f"{'holds' if holds else 'misses'}  joule's default {'holds' if default else 'misses'}  "
                  f"segments' sd {100 * row.seg_sd:4.1f}%")
    print(f"statistical intervals alone: {sum(r.holds()[0] for r in rows)} of {len(rows)} hold the truth")
    print(f"joule's default (model bias {100 * DEFAULT_BIAS:g}%, pooled from the five runs of 2026-11-26, -29): "
          f"{sum(r.default_low <= r.truth_j <= r.default_high for r in rows)} of {len(rows)}, median half-width "
          f"{100 * statistics.median((r.default_high - r.default_low) / 2 / r.est for r in rows):.1f}%")

    def bias_of(rs):
        """The root mean square of what each error has beyond its statistical sigma."""
        return math.sqrt(statistics.fmean(max(0.0, r.err ** 2 - (r.holds()[1] / Z90) ** 2) for r in rs))

    print(f"pooled model bias (1 sigma), all runs: {100 * bias_of(rows):.2f}%")
    held, widths = 0, []
    for path, rs in runs.items():
        bias = bias_of([r for other, others in runs.items() if other != path for r in others])
        for r in rs:
            holds, half = r.holds(bias)
            held += holds
            widths.append(half)
        print(f"  {path}: bias from the other runs {100 * bias:.2f}%")
    print(f"left out one run at a time: {held} of {len(rows)} hold the truth; median half-width "
          f"{100 * statistics.median(widths):.1f}%")


if __name__ == "__main__":
    main()
