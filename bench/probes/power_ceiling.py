#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): which regions a session's fit puts above
1.25 times the GPU's highest power limit (the note of
AttributionOptions::power_ceiling_w), and are those the figures that are
off? (issue 53, item 1: an interval is only honest if a figure the fit could
not separate says so.)

For stored runs of bench/gpu_attribution_real_truths.py (raw.json.gz,
result.json), refits each as a session does (the measured response, the
model bias, identical modules as one: bench/probes/twin_tying.py) with
power_ceiling_w=--ceiling-w and without, and prints the regions noted (with
a truth: the module's error without the ceiling and with it). Then, over
every module with a truth (a training run's by its forward + backward
total), the errors and the intervals that hold the truth, without the
ceiling and with it: for the modules with a noted region, the others, those
of >= 5% of the step and all. (Applied to a build with
results/2026-12-01-power-ceiling/hold-at-bound.patch, it judges holding
such regions at 1.25x the limit instead.)

  PYTHONPATH=build/python python3 bench/probes/power_ceiling.py --ceiling-w 700 RUN_DIR [RUN_DIR ...]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import joule  # noqa: E402
from joule.torch.regions import module_totals_of  # noqa: E402
from joule.torch.twins import same_power_groups  # noqa: E402
from twin_spread import groups_of  # noqa: E402  (this folder's)
from twin_tying import judged, load  # noqa: E402

NOTE = "the most this GPU can draw"


def module_of(region):
    return region.removesuffix(".forward").removesuffix(".backward")


def refit(path, monitor, ceiling_w):
    """(the attribution with the ceiling, its judged modules by path, the same without the ceiling, the truths, the
    truth's share per module) as a session fits."""
    raw, result, response = load(path)
    names = list(dict.fromkeys(v[0] for v in raw["intervals"]))
    same_power = same_power_groups(raw["intervals"], groups_of(result["model"], monitor))

    def fit(ceiling):
        return joule.attribute_data(raw["samples"], raw.get("counter", []), raw["intervals"], raw["begin_s"],
                                    raw["end_s"], raw["energy_j"], sample_response=response,
                                    totals=module_totals_of(names) or None, same_power=same_power,
                                    power_ceiling_w=ceiling)

    a = fit(ceiling_w)
    truth = result["in_mix"]
    step_j = statistics.fmean(truth["_full_step_j"])
    shares = {row["region"]: truth[row["region"]] / step_j for row in result["rows"]}
    return a, judged(a), judged(fit(None)), truth, shares


def holds(g, truth_j):
    return g.energy_low_j <= truth_j * g.calls <= g.energy_high_j


def figures(label, rows, k):
    """One line: rows' errors and intervals, k = 0 without the ceiling, 1 with it."""
    if not rows:
        return
    errors = [abs(r[k][0]) for r in rows]
    print(f"  {label:38s} {len(rows):3d}  median |error| {100 * statistics.median(errors):5.1f}%, worst "
          f"{100 * max(errors):6.1f}%, {sum(e <= 0.05 for e in errors):3d} within 5%, "
          f"{sum(r[k][1] for r in rows):3d} intervals hold")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ceiling-w", type=float, required=True, help="the GPU's highest power limit")
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    monitor = joule.Monitor(backend="sim", sim="count=1")
    rows, noted_regions = [], 0  # per module with a truth: (noted?, share, (error, holds) without, with)
    for path in args.runs:
        a, modules, unchecked, truth, shares = refit(path, monitor, args.ceiling_w)
        noted = [r for r in a.regions if any(n.startswith(f"region '{r.name}': fitted at") and NOTE in n
                                             for n in a.notes)]
        noted_regions += len(noted)
        print(f"{path}: {len(noted)} of {len(a.regions)} regions noted")
        for r in noted:
            module = module_of(r.name)
            judged_by = (f", module error {100 * (unchecked[module].energy_per_call_j / truth[module] - 1):+.1f}% "
                         f"-> {100 * (modules[module].energy_per_call_j / truth[module] - 1):+.1f}% "
                         f"(truth {100 * shares[module]:.1f}% of the step)") if module in shares else ""
            print(f"  {r.name:22s} {r.power_w:7.0f} W, {100 * r.share:5.1f}% of the energy{judged_by}")
        flagged = {module_of(r.name) for r in noted}
        for module in shares:
            if module in modules:
                rows.append((module in flagged, shares[module],
                             *((g.energy_per_call_j / truth[module] - 1, holds(g, truth[module]))
                               for g in (unchecked[module], modules[module]))))
    print(f"{noted_regions} regions noted in {len(args.runs)} runs; modules with a truth, without the ceiling / "
          "with it:")
    for label, subset in (("with a noted region", [r for r in rows if r[0]]),
                          ("the others", [r for r in rows if not r[0]]),
                          (">= 5% of the step", [r for r in rows if r[1] >= 0.05]), ("all", rows)):
        lines = [(r[2], r[3]) for r in subset]
        figures(f"{label}, without the ceiling", lines, 0)
        figures(f"{label}, with it", lines, 1)


if __name__ == "__main__":
    main()
