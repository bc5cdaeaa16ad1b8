#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (joule's module, no GPU): does the spread of identical modules'
energies (joule.torch.twins, the note a session's result carries) tell how
far the fit is off, without truths? (issue 53, items 1-2.)

For stored runs of bench/gpu_attribution_real_truths.py (result.json), finds
the model's identical modules as a session does (the model built small on
the CPU: only its structure matters) and prints, per run, their energies'
spread (pooled over the groups, 1 sigma, as joule.torch.twins computes each
group's) beside the root mean square of the same modules' errors against
their leave-one-out truths.

  PYTHONPATH=build/python python3 bench/probes/twin_spread.py RUN_DIR [RUN_DIR ...]
"""
import argparse
import json
import math
import os
import statistics
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import joule  # noqa: E402
import joule.torch  # noqa: E402
from joule.torch.twins import group_spreads, identical_modules  # noqa: E402
from ddp_train import builtin_resnet50  # noqa: E402  (bench/)
from gpt_model import SmallGPT  # noqa: E402


def groups_of(model_name, monitor):
    model = builtin_resnet50(10) if model_name == "resnet50" else SmallGPT(64, 16, 64, 2, 8)
    with joule.torch.attribute(model, monitor, clock="host") as session:
        return identical_modules(session.modules())


def run_figures(path, monitor):
    result = json.load(open(os.path.join(path, "result.json")))
    rows = {row["region"]: row for row in result["rows"]}  # the regions judged, by module path
    training = result["args"].get("train", False)

    def part(name, row):
        return types.SimpleNamespace(name=name if training else f"{name}.forward", resolved=True, calls=row["calls"],
                                     gpu_time_s=row["calls"] * row["gpu_ms_per_call"] / 1e3,
                                     energy_per_call_j=row["default"]["energy_per_call_j"])

    parts = [part(name, row) for name, row in rows.items()]
    attribution = types.SimpleNamespace(totals=parts if training else [], regions=[] if training else parts)
    squares, dof, errors = 0.0, 0, []
    for names, spread in group_spreads(attribution, groups_of(result["model"], monitor)):
        squares += spread ** 2 * (len(names) - 1)
        dof += len(names) - 1
        errors += [rows[name.removesuffix(".forward")]["default"]["error"] for name in names]
    if not dof:
        return None
    return math.sqrt(squares / dof), math.sqrt(statistics.fmean(e * e for e in errors)), len(errors)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    monitor = joule.Monitor(backend="sim", sim="count=1")
    print("| run | identical modules | their spread (no truth needed) | their rms error against the truths |")
    print("|---|---|---|---|")
    for path in args.runs:
        figures = run_figures(path, monitor)
        if figures is None:
            print(f"| {path} | - | - | - |")
            continue
        spread, rms, n = figures
        print(f"| {path} | {n} | {100 * spread:.1f}% | {100 * rms:.1f}% |")


if __name__ == "__main__":
    main()
