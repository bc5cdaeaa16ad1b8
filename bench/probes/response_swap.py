#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): does a run's fit move with the sample
response it is given? (issue 53, item 2: ResNet-50 inference under an H200's
power cap was fitted with a response measured on a load that never reaches
the cap; bench/probes/capped_response.py measures one that does.)

For stored runs of bench/gpu_attribution_real_truths.py (raw.json.gz,
result.json), refits each as a session does (the model bias, identical
modules as one: bench/probes/twin_tying.py) with the run's own response and
with each --response (a JSON holding "sample_response", or the response
itself), and prints per module with a truth and >= --min-share of the step
its error and whether the interval holds the truth, then the tally per
response.

  PYTHONPATH=build/python python3 bench/probes/response_swap.py --response responses/matmul.json RUN_DIR [...]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import joule  # noqa: E402
from joule.torch.regions import module_totals_of  # noqa: E402
from joule.torch.twins import same_power_groups  # noqa: E402
from twin_spread import groups_of  # noqa: E402  (this folder's)
from twin_tying import judged, load  # noqa: E402


def response_of(path):
    with open(path) as f:
        d = json.load(f)
    d = d.get("sample_response", d)
    return joule.SampleResponse(d["response_ms"], d["first_lag_ms"], d.get("rounds", []),
                                d.get("rounds_first_lag_ms", 0))


def module_rows(path, monitor, responses, min_share):
    """Per module with a truth and >= min_share of the step: (module, share, [(error, holds) per response])."""
    raw, result, own = load(path)
    names = list(dict.fromkeys(v[0] for v in raw["intervals"]))
    same_power = same_power_groups(raw["intervals"], groups_of(result["model"], monitor))
    fits = [judged(joule.attribute_data(raw["samples"], raw.get("counter", []), raw["intervals"], raw["begin_s"],
                                        raw["end_s"], raw["energy_j"], sample_response=response,
                                        totals=module_totals_of(names) or None, same_power=same_power))
            for response in [own, *responses]]
    truth = result["in_mix"]
    step_j = statistics.fmean(truth["_full_step_j"])
    def judged_by(g, truth_j):
        return g.energy_per_call_j / truth_j - 1, g.energy_low_j <= truth_j * g.calls <= g.energy_high_j

    rows = []
    for row in result["rows"]:
        module, share = row["region"], truth[row["region"]] / step_j
        if share >= min_share and module in fits[0]:
            rows.append((module, share, [judged_by(fit[module], truth[module]) for fit in fits]))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--response", action="append", default=[], help="a response's JSON (repeatable)")
    p.add_argument("--min-share", type=float, default=0.05)
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    responses = [response_of(path) for path in args.response]
    labels = ["own", *(os.path.join(os.path.basename(os.path.dirname(f)), os.path.basename(f)) for f in args.response)]
    monitor = joule.Monitor(backend="sim", sim="count=1")
    everything = []
    for path in args.runs:
        print(path)
        for module, share, judged_by in module_rows(path, monitor, responses, args.min_share):
            everything.append(judged_by)
            print(f"  {module:12s} {100 * share:5.1f}% of the step: " + ", ".join(
                f"{label} {100 * err:+6.1f}% {'holds' if ok else 'MISSES'}"
                for label, (err, ok) in zip(labels, judged_by)))
    for k, label in enumerate(labels):
        errors = [abs(j[k][0]) for j in everything]
        print(f"{label:40s} {len(errors)} modules: median |error| {100 * statistics.median(errors):.1f}%, "
              f"{sum(e <= 0.05 for e in errors)} within 5%, {sum(j[k][1] for j in everything)} intervals hold")


if __name__ == "__main__":
    main()
