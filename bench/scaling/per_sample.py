#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per sample and per GPU-hour per configuration of a scaling sweep (issue 36), from the
CSV that `joule sweep --export` writes: a Markdown table for summary.md.

  python3 bench/scaling/per_sample.py OUT/resnet50_weak_runs.csv

Per configuration, over its successful runs (the latest attempt of each repeat, as the analysis
counts them): runs, mean time, mean GPU energy, mean samples, GPU energy per sample (mean energy /
mean samples), GPU-hours per run (GPUs x time) and GPU energy per GPU-hour (the mean power per GPU,
in W), and samples per second. GPU energy only (`gpu_energy_j`): CPU and DRAM, where measured,
are in the CSV beside it.
"""
import csv
import json
import statistics
import sys


def latest_ok_runs(rows):
    """The latest attempt of each configuration and repeat, kept when it succeeded."""
    latest = {}
    for row in rows:
        key = (row["config"], row["repeat"])
        if key not in latest or int(row["id"]) > int(latest[key]["id"]):
            latest[key] = row
    return [row for row in latest.values() if row["status"] == "ok"]


def table(rows):
    groups = {}
    for row in latest_ok_runs(rows):
        groups.setdefault(row["config"], []).append(row)
    lines = ["| configuration | runs | time s | GPU energy J | samples | J / sample | GPU-h / run | W / GPU | "
             "samples / s |", "|---|---|---|---|---|---|---|---|---|"]

    def order(config):
        values = json.loads(config)
        return [int(v) if v.isdigit() else v for k, v in sorted(values.items()) if k != "gpus"] + [
            int(values.get("gpus", 1))]

    for config in sorted(groups, key=order):
        runs = groups[config]
        gpus = int(json.loads(config).get("gpus", 1))
        time_s = statistics.mean(float(r["elapsed_s"]) for r in runs)
        energy_j = statistics.mean(float(r["gpu_energy_j"]) for r in runs)
        counted = [float(r["samples"]) for r in runs if r["samples"]]
        samples = statistics.mean(counted) if counted else float("nan")
        gpu_hours = gpus * time_s / 3600
        name = " ".join(f"{k}={v}" for k, v in json.loads(config).items())
        lines.append(f"| {name} | {len(runs)} | {time_s:.2f} | {energy_j:.0f} | {samples:.0f} | "
                     f"{energy_j / samples:.3f} | {gpu_hours:.5f} | {energy_j / 3600 / gpu_hours:.0f} | "
                     f"{samples / time_s:.1f} |")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: per_sample.py RUNS_CSV")
    with open(sys.argv[1], newline="") as f:
        print(table(list(csv.DictReader(f))))


if __name__ == "__main__":
    main()
