#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (no GPU): how well defined the proof's truths in the mix are
(issue 53, item 1: the truths' own error). Reads result.json files of
bench/gpu_attribution_proof.py runs made with --loo-repeats K --loo-pairs.

Per region: the leave-one-out truth (the step's energy less the step's
without the region), its standard error over the K repeats, the interaction
of each pair (the pair left out less the two left out alone: what neither
single truth owns), the sum of the region's interactions, and the
second-order Shapley value (the leave-one-out truth plus half of each of its
pair interactions: each pair's interaction shared equally, as a split of one
step into additive parts must). Then the fit's energy per call (the full
window) against both truths, and whether each lies in the fit's interval.

Usage: truth_interactions.py [--markdown] RUN_DIR [RUN_DIR ...]
"""
import argparse
import json
import math


def analyse(path):
    result = json.load(open(f"{path}/result.json"))
    truth = result["in_mix"]
    if "_pairs" not in truth:
        raise SystemExit(f"{path}: made without --loo-pairs (no pair interactions)")
    window = result["windows"][-1]
    fitted = {row["region"]: row for row in window["comparison"]}
    names = list(truth["_repeats_j"])
    interaction = {n: {} for n in names}
    for pair, values in truth["_pairs"].items():
        a, b = pair.split("+")
        interaction[a][b] = interaction[b][a] = values["interaction_j"]
    rows = []
    for n in names:
        loo = truth[n]
        shapley = loo + 0.5 * sum(interaction[n].values())
        fit = fitted.get(n, {})
        per_call, low, high = (fit.get(k, math.nan) for k in ("energy_per_call_j", "low_per_call_j", "high_per_call_j"))
        rows.append({"region": n, "share": fit.get("share", math.nan), "loo_j": loo, "loo_se_j": truth["_spread_j"][n],
                     "interactions_j": interaction[n], "interaction_sum_j": sum(interaction[n].values()),
                     "shapley_j": shapley, "fit_j": per_call, "low_j": low, "high_j": high,
                     "error_vs_loo": per_call / loo - 1, "error_vs_shapley": per_call / shapley - 1,
                     "loo_inside": low <= loo <= high, "shapley_inside": low <= shapley <= high})
    full = truth["_full_step_j"]
    return {"run": path, "full_step_j": full, "drift_j": truth["error_j"], "rows": rows}


def pct(x):
    return "-" if not math.isfinite(x) else f"{100 * x:+.1f}%"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    for run in map(analyse, args.runs):
        print(f"\n{run['run']}: full step {', '.join(f'{f:.3f}' for f in run['full_step_j'])} J "
              f"(drift {run['drift_j']:.3f} J)")
        if args.markdown:
            print("| region | share | leave-one-out J/step (SE) | its pair interactions, J | Shapley-2 J/step | fit J/call "
                  "[90%] | fit vs leave-one-out | fit vs Shapley-2 |\n|---|---|---|---|---|---|---|---|")
        for r in run["rows"]:
            inter = ", ".join(f"{k} {v:+.2f}" for k, v in r["interactions_j"].items())
            cells = [r["region"], f"{100 * r['share']:.1f}%", f"{r['loo_j']:.3f} ({r['loo_se_j']:.3f})", inter,
                     f"{r['shapley_j']:.3f}", f"{r['fit_j']:.3f} [{r['low_j']:.3f}, {r['high_j']:.3f}]",
                     f"{pct(r['error_vs_loo'])} {'in' if r['loo_inside'] else 'out'}",
                     f"{pct(r['error_vs_shapley'])} {'in' if r['shapley_inside'] else 'out'}"]
            print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))


if __name__ == "__main__":
    main()
