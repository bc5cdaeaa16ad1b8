#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Offline (numpy, no GPU): do a run's power samples agree with its
leave-one-out truths? (issue 53, item 2: ResNet-50 inference's layer 2 is
fitted 11% under its truth and layer 3 15% over, with truths that repeat
within 3%; bench/README.md section 16n.)

For a run of bench/gpu_attribution_real_truths.py (raw.json.gz and
result.json), in inference (one "<path>.forward" region per module), fits
the samples by least squares the way response_shift.py does (the measured
response, 0.1 ms bins; the named groups' modules with one power each, every
other region and the idle time its own). Then it imposes on the groups the
powers their truths say (their truths' J a step over their time a step),
refits the rest, and prints the residual along the way from the fit's powers
to the truths': a flat curve means the samples cannot tell the two apart, a
rising one that they contradict the truths, given the response. Last, the
groups' powers with the response moved --shifts ms later (+) or earlier.

  python3 bench/probes/truth_vs_samples.py RUN_DIR --group L2=8,9,10 --group L3=12,13,14,15,16
"""
import argparse
import gzip
import json

import numpy as np

from response_shift import BINS_PER_MS, share_columns  # this folder's

SUFFIX = ".forward"


class Samples:
    """The run's samples and, per region (and the idle time), its response-weighted share before each stamp."""

    def __init__(self, path):
        raw = json.load(gzip.open(f"{path}/raw.json.gz"))
        result = json.load(open(f"{path}/result.json"))
        self.truth, response = result["in_mix"], result["sample_response"]
        names, cols = share_columns(raw["intervals"], raw["begin_s"], raw["end_s"])
        self.labels = names + ["idle"]
        self.bins = cols.shape[1]
        steps = sum(1 for r, _, _, resumed in raw["intervals"] if r == names[0] and not resumed)
        self.seconds_per_step = cols.sum(axis=1) / (1e3 * BINS_PER_MS) / steps
        kernel = np.repeat(np.array(response["response_ms"]) / BINS_PER_MS, BINS_PER_MS)
        self.kernel_bins = len(kernel)
        self.convolved = np.array([np.convolve(c, kernel / kernel.sum())[:self.bins] for c in cols])
        stamps = np.array([(end - raw["begin_s"]) * 1e3 * BINS_PER_MS for _, end, _ in raw["samples"]])
        self.newest_bin = np.round(stamps).astype(int) - 1 - response["first_lag_ms"] * BINS_PER_MS
        self.power_w = np.array([p for _, _, p in raw["samples"]])

    def design(self, groups, shift_ms=0):
        """(columns, their labels, the samples): each group one column, the rest one each."""
        newest = self.newest_bin - shift_ms * BINS_PER_MS
        keep = (newest - self.kernel_bins >= 0) & (newest < self.bins)
        x = self.convolved[:, newest[keep]].T
        grouped = {self.labels.index(m + SUFFIX) for members in groups.values() for m in members}
        cols = [x[:, [self.labels.index(m + SUFFIX) for m in members]].sum(axis=1) for members in groups.values()]
        rest = [i for i in range(len(self.labels)) if i not in grouped]
        return np.column_stack(cols + [x[:, i] for i in rest]), list(groups) + [self.labels[i] for i in rest], \
            self.power_w[keep]

    def truth_power_w(self, members):
        seconds = sum(self.seconds_per_step[self.labels.index(m + SUFFIX)] for m in members)
        return sum(self.truth[m] for m in members) / seconds


def rms_with_fixed(a, y, fixed):
    """The residual rms with the columns in `fixed` (index: power) held, the others refitted."""
    free = [i for i in range(a.shape[1]) if i not in fixed]
    rest = y - sum(a[:, i] * p for i, p in fixed.items())
    beta = np.linalg.lstsq(a[:, free], rest, rcond=None)[0]
    return float(np.sqrt(np.mean((rest - a[:, free] @ beta) ** 2)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--group", action="append", required=True, help="NAME=path,path,... (modules with one power)")
    p.add_argument("--shifts", default="-12,-8,-4,0,4,8,12,16", help="ms")
    args = p.parse_args()
    groups = dict((g.split("=")[0], g.split("=")[1].split(",")) for g in args.group)
    run = Samples(args.run_dir)
    a, _, y = run.design(groups)
    beta = np.linalg.lstsq(a, y, rcond=None)[0]
    truth_w = {g: run.truth_power_w(members) for g, members in groups.items()}
    print(f"{args.run_dir}: {len(y)} samples")
    print("  group  fitted W  truth W")
    for k, g in enumerate(groups):
        print(f"  {g:6s} {beta[k]:8.0f} {truth_w[g]:8.0f}")
    fitted_rms = rms_with_fixed(a, y, {})
    print("  from the fit's powers (0) to the truths' (1): residual rms, W")
    for f in (0.0, 0.25, 0.5, 0.75, 1.0):
        rms = rms_with_fixed(a, y, {k: beta[k] + f * (truth_w[g] - beta[k]) for k, g in enumerate(groups)})
        print(f"    {f:4.2f}  {rms:7.3f}  ({100 * (rms / fitted_rms - 1):+.1f}%)")
    print("  the response moved (ms): residual rms, W; the groups' powers")
    for shift_ms in (int(s) for s in args.shifts.split(",")):
        a, _, y = run.design(groups, shift_ms)
        beta = np.linalg.lstsq(a, y, rcond=None)[0]
        print(f"    {shift_ms:+3d}  {np.sqrt(np.mean((y - a @ beta) ** 2)):7.3f}  " +
              "  ".join(f"{g} {beta[k]:.0f}" for k, g in enumerate(groups)))


if __name__ == "__main__":
    main()
