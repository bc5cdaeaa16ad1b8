#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""How well a window edge inside an energy-counter step is placed, with the
counter itself as the truth: leave one step out. For every counter step k
of a run recorded by bench/gpu_short_windows.py (its "samples": monitor A's
power samples, and "steps": the counter's steps, both on time.monotonic),
take [t(k-1), t(k+1)] as one step of known energy and t(k) as the edge: the
truth is the share the counter itself gives, (C(k) - C(k-1)) / (C(k+1) -
C(k-1)), up to the placement of t(k) (the reads around it).

Each edge is split on the same real samples:
  linear    joule's reading: the samples' integral from the steadier side,
            or shared in proportion where both sides are steady
            (src/measure/window_energy.cc, replayed);
  shifted   the samples shared in proportion, their stamps moved by
            -20 to +10 ms: where the counter's timing lies against them;
  response  joule.step_share_before with joule's built-in response (the split
            through the samples' measured response), where the joule
            imported has it: commit ed5ae18 only, since it was worse.
The error is in joules (share error times the two steps' energy). Edges are
grouped by whether the load switched inside the pseudo-step ("phases" of the
file: onoff, flat).

  python3 bench/probes/step_split.py bench/results/2026-11-30-h200-short-windows/flat-5.json
"""
import bisect
import json
import statistics
import sys

try:
    import joule
except ImportError:  # the response column needs it; the rest does not
    joule = None

STEADY_J = 0.5  # window_energy.cc: kSteadyJ
SHIFTS_MS = (-20, -15, -10, -5, 0, 5, 10)  # moved earlier (negative) or later


def integral(samples, stamps, t0, t1):
    """The samples read linearly: each the power over (previous stamp, stamp]."""
    out = 0.0
    i = max(1, bisect.bisect_left(stamps, t0))
    while i < len(samples) and samples[i - 1][1] < t1:
        lo, hi = max(samples[i - 1][1], t0), min(samples[i][1], t1)
        if hi > lo:
            out += samples[i][2] * (hi - lo)
        i += 1
    return out


def power_range(samples, stamps, t0, t1):
    i, j = max(0, bisect.bisect_left(stamps, t0)), bisect.bisect_right(stamps, t1) + 1
    powers = [p for _, _, p in samples[i:j]]
    return max(powers) - min(powers) if powers else 0.0


def linear_share(samples, stamps, a, b, t):
    step = integral(samples, stamps, a, b)
    before, after = integral(samples, stamps, a, t), integral(samples, stamps, t, b)
    bound_before = power_range(samples, stamps, a, t) * (t - a)
    bound_after = power_range(samples, stamps, t, b) * (b - t)
    return step, before, after, bound_before <= STEADY_J and bound_after <= STEADY_J, bound_before <= bound_after


def main():
    for path in sys.argv[1:]:
        data = json.load(open(path))
        setup = data["setup"]
        response = None
        if joule is not None and hasattr(joule, "step_share_before"):
            response = joule.builtin_sample_response(setup["name"], setup["driver"])
        samples = sorted(tuple(s) for s in data["samples"])
        stamps = [s[1] for s in samples]
        pairs = [(s[1], s[2]) for s in samples]
        steps = data["steps"][0]
        t = [0.5 * (lo + hi) for lo, hi, _ in steps]
        half = [0.5 * (hi - lo) for lo, hi, _ in steps]
        c = [v / 1000.0 for _, _, v in steps]
        switches = sorted(x for p in data.get("phases", []) if p[2] for x in p[:2])
        rows = []
        for k in range(1, len(t) - 1):
            a, edge, b = t[k - 1], t[k], t[k + 1]
            if not stamps or a - 0.2 < stamps[0] or b + 0.2 > stamps[-1] or b - a > 0.25:
                continue
            energy = c[k + 1] - c[k - 1]
            truth = (c[k] - c[k - 1]) / energy
            share = joule.step_share_before(pairs, response, a, b, energy, edge) if response else None
            step, before, after, both_steady, from_before = linear_share(samples, stamps, a, b, edge)
            if both_steady:
                linear_j = c[k - 1] + before / step * energy
            elif from_before:
                linear_j = c[k - 1] + before
            else:
                linear_j = c[k + 1] - after
            switched = bisect.bisect_right(switches, b) > bisect.bisect_left(switches, a)
            shifted = {}
            for shift_ms in SHIFTS_MS:
                d = shift_ms / 1e3
                moved = [(x + d, y + d, p) for x, y, p in samples[max(0, bisect.bisect_left(stamps, a - 0.1)):
                                                                  bisect.bisect_right(stamps, b + 0.1)]]
                moved_stamps = [m[1] for m in moved]
                part = integral(moved, moved_stamps, a, edge) / integral(moved, moved_stamps, a, b)
                shifted[shift_ms] = abs((part - truth) * energy)
            rows.append({"switched": switched, "placement_j": half[k] * (c[k + 1] - c[k - 1]) / (b - a),
                         "response_j": None if share is None else (share - truth) * energy,
                         "linear_j": linear_j - c[k], "shifted_j": shifted})
        print(f"{path}: {setup['name']}, driver {setup['driver']}, {len(rows)} edges (counter steps)")
        shifts = " | ".join(f"{m:+d} ms" for m in SHIFTS_MS)
        print(f"| edges | n | placement of the truth, mean J | linear: mean abs J (max) | response: mean abs J (max) "
              f"| proportional, samples moved: {shifts} |")
        print("|---|---|---|---|---|" + "---|" * len(SHIFTS_MS))
        for label, sel in (("all", rows), ("a switch inside", [r for r in rows if r["switched"]]),
                           ("no switch", [r for r in rows if not r["switched"]])):
            if not sel:
                continue
            lin = [abs(r["linear_j"]) for r in sel]
            resp = [abs(r["response_j"]) for r in sel if r["response_j"] is not None]
            resp_cell = f"{statistics.mean(resp):.2f} ({max(resp):.1f})" if resp else "-"
            moved = " | ".join(f"{statistics.mean(r['shifted_j'][m] for r in sel):.2f}" for m in SHIFTS_MS)
            print(f"| {label} | {len(sel)} | {statistics.mean(r['placement_j'] for r in sel):.2f} | "
                  f"{statistics.mean(lin):.2f} ({max(lin):.1f}) | {resp_cell} | {moved} |")
        print()


if __name__ == "__main__":
    main()
