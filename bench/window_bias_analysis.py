#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Each window of bench/gpu_window_bias.py against the counter reference,
read two ways at each edge.

The counter moves in steps (100 ms on an H100/H200); an edge falls inside one,
and the energy from the step before the edge (s0) to the edge (t) is not seen
by the counter: it must be assumed. Two ways:

  linear   the step's average power: E(t) = E(s0) + (E(s1) - E(s0)) (t - s0) / (s1 - s0).
           Wrong where the power changes at the edge, and each loaded window
           of the probe changes it at both edges: its load starts just after
           the begin edge and stops at the end edge. The stretch before the
           edge is then charged part of the other side's power, and the
           window reads low by up to (P_after - P_before) u (1 - u) x 100 ms
           per edge (u: the edge's place in its step), a sixth of that on
           average: 0.4-0.6% of a 5 s window at 700 W.
  held     the power of the step before, held up to the edge:
           E(t) = E(s0) + P(s-1, s0) (t - s0), within [E(s0), E(s1)].

The reference takes, at each edge, the one whose assumption holds there:
"held" where the GPU was steady before the edge (no load switch from
--settle-s before step s-1 up to the edge: each loaded window's edges, and
an idle window's end), with an uncertainty of the step's placement (half
the gap between the reads around it, times that power) plus how much the
power moved between the two steps before (|P(s-1, s0) - P(s-2, s-1)| (t - s0));
"linear" where a switch came shortly before (an idle window begun as the
load before it stops, or the first window after the burst), with an
uncertainty of the step's placement plus the farthest the stretch's energy
can be from it while the power stays within the range of the step averages
around the edge (from the step before to the step after).

Per window and GPU: joule's energy, the reference (and the linear reading
alone, for comparison), the edges' places in their steps, joule's method,
calibration scale and anchoring. Verdicts (issue 54): the mean of joule
against the reference within 0.3%, and no window off by more than twice the
reference's uncertainty plus 0.5%.

  python3 bench/window_bias_analysis.py nccl-1.json gloo-1.json ... [--markdown]
"""
import argparse
import bisect
import json
import math
import statistics


class Counter:
    def __init__(self, steps):
        # A step at the midpoint of the reads around it, +- half their gap.
        self.t = [0.5 * (lo + hi) for lo, hi, _ in steps]
        self.half = [0.5 * (hi - lo) for lo, hi, _ in steps]
        self.j = [v / 1000.0 for _, _, v in steps]

    def power_w(self, k):
        """Average power from step k-1 to step k."""
        return (self.j[k] - self.j[k - 1]) / (self.t[k] - self.t[k - 1])

    def at(self, t, switches, settle_s):
        """The energy at instant t: {linear, ref, unc_j, model, u, jump_w}."""
        k = bisect.bisect_right(self.t, t) - 1
        if k < 2 or k + 2 >= len(self.t):
            nan = float("nan")
            return {"linear": nan, "ref": nan, "unc_j": nan, "model": "none", "u": nan, "jump_w": nan}
        t0, t1, e0, e1 = self.t[k], self.t[k + 1], self.j[k], self.j[k + 1]
        u = (t - t0) / (t1 - t0)
        linear = e0 + (e1 - e0) * u
        p_before = self.power_w(k)
        placement_j = abs(p_before) * self.half[k]
        # A switch at the edge itself (a loaded window's own) comes after the stretch.
        steady = not any(self.t[k - 1] - settle_s <= s < t - 1e-6 for s in switches)
        if steady:
            ref = min(max(e0 + p_before * (t - t0), e0), e1)
            unc = placement_j + abs(p_before - self.power_w(k - 1)) * (t - t0)
            model = "held"
        else:
            powers = [self.power_w(i) for i in (k, k + 1, k + 2)]
            low = max(e0 + min(powers) * (t - t0), e1 - max(powers) * (t1 - t))
            high = min(e0 + max(powers) * (t - t0), e1 - min(powers) * (t1 - t))
            ref = linear
            unc = placement_j + max(abs(linear - low), abs(high - linear))
            model = "linear"
        return {"linear": linear, "ref": ref, "unc_j": unc, "model": model, "u": u,
                "jump_w": self.power_w(k + 2) - p_before}


def analyse(path, settle_s):
    data = json.load(open(path))
    counters = [Counter(s) for s in data["steps"]]
    setup = data["setup"]
    # Where each GPU's load switches: its burst's end (each rank's own; where
    # the file does not say, unknown: just before the first window), and
    # each loaded window's edges.
    loaded_edges = [edge for w in data["windows"] if w["kind"] == "loaded" for edge in (w["begin_s"], w["end_s"])]
    first_begin_s = data["windows"][0]["begin_s"]
    burst_ends = setup.get("burst_end_s_per_gpu") or [first_begin_s - 1e-3] * len(counters)
    rows = []
    for w in data["windows"]:
        for i, (joule_j, source) in enumerate(zip(w["joule_gpu_j"], w["sources"])):
            switches = [burst_ends[i]] + loaded_edges
            b = counters[i].at(w["begin_s"], switches, settle_s)
            e = counters[i].at(w["end_s"], switches, settle_s)
            ref = e["ref"] - b["ref"]
            linear = e["linear"] - b["linear"]
            rows.append({
                "file": path, "backend": setup["backend"], "window": w["window"], "kind": w["kind"],
                "age_s": w["age_s"], "elapsed_s": w["elapsed_s"], "gpu": i, "joule_j": joule_j,
                "ref_j": ref, "linear_j": linear, "unc_j": b["unc_j"] + e["unc_j"],
                "models": f"{b['model']}/{e['model']}", "u_begin": b["u"], "u_end": e["u"],
                "jump_begin_w": b["jump_w"], "jump_end_w": e["jump_w"], "anchored": source["anchored"],
                "scale": source["scale"], "method": source["method"],
                "vs_ref_pct": 100 * (joule_j / ref - 1), "vs_linear_pct": 100 * (joule_j / linear - 1),
            })
    return rows


def linear_bias_fit(rows, step_s=0.1):
    """How much of joule minus the linear reading the edges explain: the
    least-squares slope (through 0) and correlation of joule - linear
    against step_s (jump_b u_b (1 - u_b) - jump_e u_e (1 - u_e)), what
    linear interpolation misses where the power jumps at the edges."""
    pairs = [(step_s * (r["jump_begin_w"] * r["u_begin"] * (1 - r["u_begin"])
                        - r["jump_end_w"] * r["u_end"] * (1 - r["u_end"])), r["joule_j"] - r["linear_j"])
             for r in rows if math.isfinite(r["linear_j"])]
    xx = sum(x * x for x, _ in pairs)
    slope = sum(x * y for x, y in pairs) / xx if xx > 0 else float("nan")
    try:
        correlation = statistics.correlation(*zip(*pairs))
    except (statistics.StatisticsError, ValueError):  # fewer than two points, or a constant input
        correlation = float("nan")
    return slope, correlation


def verdict(rows):
    errors = [r["vs_ref_pct"] for r in rows if math.isfinite(r["vs_ref_pct"])]
    beyond = [r for r in rows
              if abs(r["joule_j"] - r["ref_j"]) > 2 * r["unc_j"] + 0.005 * r["ref_j"]]
    return statistics.mean(errors) if errors else float("nan"), beyond


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--markdown", action="store_true", help="one table row per file and kind")
    parser.add_argument("--settle-s", type=float, default=0.5,
                        help="how long the power takes to settle after the load switches")
    args = parser.parse_args()
    every = []
    for path in args.files:
        rows = analyse(path, args.settle_s)
        every += rows
        if args.markdown:
            for kind in ("idle", "loaded"):
                sel = [r for r in rows if r["kind"] == kind]
                mean, beyond = verdict(sel)
                lin = statistics.mean(r["vs_linear_pct"] for r in sel)
                span = f"{min(r['vs_ref_pct'] for r in sel):+.2f}..{max(r['vs_ref_pct'] for r in sel):+.2f}%"
                print(f"| {path} | {kind} | {len(sel)} | {lin:+.2f}% | {mean:+.2f}% | {span} | "
                      f"{statistics.median(r['unc_j'] / r['ref_j'] * 100 for r in sel):.2f}% | "
                      f"{sum(r['anchored'] for r in sel)}/{len(sel)} | {len(beyond)} |")
            continue
        print(f"== {path}")
        for r in rows:
            print(f"{r['window']:>10} gpu{r['gpu']} age {r['age_s']:5.1f} s: joule {r['joule_j']:8.1f} J, "
                  f"ref {r['ref_j']:8.1f} +- {r['unc_j']:4.1f} J ({r['vs_ref_pct']:+.2f}%, {r['models']}), "
                  f"linear {r['linear_j']:8.1f} J ({r['vs_linear_pct']:+.2f}%); edges at u={r['u_begin']:.2f}"
                  f" (jump {r['jump_begin_w']:+.0f} W), u={r['u_end']:.2f} (jump {r['jump_end_w']:+.0f} W); "
                  f"{'anchored' if r['anchored'] else 'NOT anchored'} x{r['scale']:.4f}")
        for kind in ("idle", "loaded"):
            sel = [r for r in rows if r["kind"] == kind]
            mean, beyond = verdict(sel)
            print(f"  {kind}: {len(sel)} GPU-windows, vs reference mean {mean:+.3f}%, vs linear mean "
                  f"{statistics.mean(r['vs_linear_pct'] for r in sel):+.3f}%, beyond 2 unc + 0.5%: {len(beyond)}")
    loaded = [r for r in every if r["kind"] == "loaded"]
    if loaded:
        slope, correlation = linear_bias_fit(loaded)
        print(f"loaded windows: joule - linear against what linear interpolation misses at the edges: "
              f"slope {slope:.2f}, correlation {correlation:.2f} ({len(loaded)} GPU-windows)")
    mean, beyond = verdict(every)
    print(f"all files: {len(every)} GPU-windows, vs reference mean {mean:+.3f}% "
          f"(loaded {verdict([r for r in every if r['kind'] == 'loaded'])[0]:+.3f}%, "
          f"idle {verdict([r for r in every if r['kind'] == 'idle'])[0]:+.3f}%), beyond: {len(beyond)}")


if __name__ == "__main__":
    main()
