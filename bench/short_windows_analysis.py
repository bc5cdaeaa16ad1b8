#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The windows of bench/gpu_short_windows.py against the counter reference:
monitor A (sample_response="auto") and monitor B (sample_response=None, the
linear reading), per window kind: 'step', 'group10', 'group50' (and the steps
with and without a stall) for --mode resnet, '0.5 s', '1 s', '2 s' for
--mode onoff.

The reference's energy at each edge, and its uncertainty, are
bench/window_bias_analysis.py's (Counter.at): "held" (the power of the
counter step before the edge, held up to it) where the load did not switch
from --settle-s before that step up to the edge, else "linear"; the
uncertainty is the step's placement plus how far the assumption can be off.
The load switches are the file's switches_s (resnet: each stall's start and
end; onoff: each busy phase's start and end). Each monitor's window is read
at its own edges. A window counts only where the reference is valid (counter
steps on both sides of both edges, a positive energy) and both monitors
settled it.

A stall (resnet) switches the load inside a counter step (100 ms), and a
step window (tens of ms) is shorter than one: the power bound at a "linear"
edge (the range of the step averages around it) then no longer holds, and the
reference's uncertainty is too small (with a simulated exact monitor, about a
quarter of its step windows read "beyond 2u"). --wide takes the whole file's
range of step averages at such edges (WideCounter); "switch edges" counts them.

Per file and kind, for A and B: the mean error (signed), the mean and the
largest |error| against the reference (%), and how many windows are off by
more than twice the reference's uncertainty (>2u); the reference's own
uncertainty (median and mean, % of the window's energy); how many windows A
reads closer to the reference than B.

  python3 bench/short_windows_analysis.py resnet-1.json onoff-1.json [--wide] [--json [--rows]] [--settle-s 0.5]
"""
import argparse
import bisect
import json
import math
import statistics

from window_bias_analysis import Counter  # this folder's

# ", held": the windows whose both edges have a "held" reference (no switch
# in the step before either edge: the reference is exact up to the steps'
# placement and the held power's drift).
GROUPS = {"resnet": ["step", "group10", "group10, held", "group50", "group50, held", "step, stall", "step, no stall"],
          "onoff": ["0.5 s", "1 s", "2 s"], "flat": ["0.3 s", "0.5 s", "1 s"]}


class WideCounter(Counter):
    """Counter.at, and with wide=True, where the load switches inside the
    counter steps around a "linear" edge (from the step before the edge's to
    the step after it: a stall of a few ms), the power bound taken from the
    whole file's step averages (1st to 99th percentile) instead of the three
    steps' at the edge, which such a switch leaves: model "linear-wide"."""

    def __init__(self, steps, wide):
        super().__init__(steps)
        powers = sorted(self.power_w(k) for k in range(1, len(self.t)))
        cut = len(powers) // 100
        self.p_lo, self.p_hi = (powers[cut], powers[-1 - cut]) if powers else (math.nan, math.nan)
        self.wide = wide

    def at(self, t, switches, settle_s):
        r = super().at(t, switches, settle_s)
        k = bisect.bisect_right(self.t, t) - 1
        r["switch"] = r["model"] != "none" and any(self.t[k - 1] <= s <= self.t[k + 1] for s in switches)
        if not (self.wide and r["switch"] and r["model"] == "linear"):
            return r
        t0, t1, e0, e1 = self.t[k], self.t[k + 1], self.j[k], self.j[k + 1]
        low = max(e0 + self.p_lo * (t - t0), e1 - self.p_hi * (t1 - t))
        high = min(e0 + self.p_hi * (t - t0), e1 - self.p_lo * (t1 - t))
        placement_j = abs(self.power_w(k)) * self.half[k]
        r.update(unc_j=placement_j + max(abs(r["linear"] - low), abs(high - r["linear"]), 0.0), model="linear-wide")
        return r


AT_EDGE_S = 0.002


class PhaseCounter(Counter):
    """Where the load's phases were recorded (onoff, flat: [start, end, busy]
    on time.monotonic): the power is one level per phase, fitted to the
    counter steps, and a counter step's energy is shared out inside it by
    that level model (so the reference is the counter's at every step). Its
    uncertainty at t: the placement, plus the part of the step's residual
    (counter less model) that could fall on the wrong side of t. The levels
    switch at the load's own times (the work's), while the counter lags the
    work by ~16 ms as the samples do (bench/probes/step_split.py): inside a
    step this reference sits between the two timings."""

    def __init__(self, steps, phases):
        super().__init__(steps)
        self.phases = sorted((a, b) for a, b, _ in phases)
        self.starts = [a for a, _ in self.phases]
        self.level = self._fit()

    def _overlaps(self, t0, t1):
        """(phase index, seconds) of each phase inside [t0, t1]."""
        i = max(0, bisect.bisect_right(self.starts, t0) - 1)
        out = []
        while i < len(self.phases) and self.phases[i][0] < t1:
            a, b = self.phases[i]
            if min(b, t1) > max(a, t0):
                out.append((i, min(b, t1) - max(a, t0)))
            i += 1
        return out

    def _fit(self):
        """Least squares over the steps the phases cover (normal equations,
        solved by elimination: a few hundred phases at most)."""
        n = len(self.phases)
        ata = [[0.0] * n for _ in range(n)]
        aty = [0.0] * n
        for k in range(1, len(self.t)):
            over = self._overlaps(self.t[k - 1], self.t[k])
            if not over or abs(sum(sec for _, sec in over) - (self.t[k] - self.t[k - 1])) > 1e-3:
                continue
            y = self.j[k] - self.j[k - 1]
            for i, si in over:
                aty[i] += si * y
                for j, sj in over:
                    ata[i][j] += si * sj
        seen = [ata[i][i] > 0 for i in range(n)]
        for i in range(n):
            ata[i][i] += 1e-12 if seen[i] else 1.0  # an unseen phase: level 0, reported NaN
        for c in range(n):  # Gaussian elimination with partial pivoting
            p = max(range(c, n), key=lambda r: abs(ata[r][c]))
            ata[c], ata[p], aty[c], aty[p] = ata[p], ata[c], aty[p], aty[c]
            for r in range(c + 1, n):
                f = ata[r][c] / ata[c][c]
                if f:
                    for j in range(c, n):
                        ata[r][j] -= f * ata[c][j]
                    aty[r] -= f * aty[c]
        level = [0.0] * n
        for c in range(n - 1, -1, -1):
            level[c] = (aty[c] - sum(ata[c][j] * level[j] for j in range(c + 1, n))) / ata[c][c]
        return [x if ok else math.nan for x, ok in zip(level, seen)]

    def model_j(self, t0, t1):
        return sum(self.level[i] * sec for i, sec in self._overlaps(t0, t1))

    def at(self, t, switches, settle_s):
        k = bisect.bisect_right(self.t, t) - 1
        nan = float("nan")
        if k < 2 or k + 2 >= len(self.t):
            return {"linear": nan, "ref": nan, "unc_j": nan, "model": "none", "u": nan, "jump_w": nan, "switch": False}
        t0, t1, e0, e1 = self.t[k], self.t[k + 1], self.j[k], self.j[k + 1]
        whole, part = self.model_j(t0, t1), self.model_j(t0, t)
        residual = (e1 - e0) - whole
        u = (t - t0) / (t1 - t0)
        ref = e0 + part + residual * u
        placement_j = abs(self.power_w(k)) * self.half[k]
        return {"linear": e0 + (e1 - e0) * u, "ref": ref, "unc_j": placement_j + abs(residual) * min(u, 1 - u),
                "model": "phases", "u": u, "jump_w": nan,
                "switch": any(t0 <= s <= t1 for s in switches)}


def edge(counter, switches, t, settle_s):
    """The reference at instant t, given only the switches that can matter (the
    ten seconds before t: Counter.at looks from the step before t's on)."""
    near = switches[bisect.bisect_left(switches, t - 10.0 - settle_s):bisect.bisect_right(switches, t + 1.0)]
    # A stall that ends at the edge (resnet: its sleep returns, the edges are
    # made, then the step's work begins) switches the load at the edge, not
    # before it: the GPU idles until after the edge.
    near = [s for s in near if not t - AT_EDGE_S <= s < t]
    return counter.at(t, near, settle_s)


def analyse(path, settle_s, wide):
    data = json.load(open(path))
    phases = data.get("phases") or []
    counter = PhaseCounter(data["steps"][0], phases) if phases and not wide else WideCounter(data["steps"][0], wide)
    switches = sorted(data.get("switches_s", []))
    rows = []
    for w in data["windows"]:
        row = {"name": w["name"], "kind": w["kind"], "stall_s": w.get("stall_s", 0.0)}
        valid = True
        for k in "ab":
            m = w[k]
            b = edge(counter, switches, m["begin_s"], settle_s)
            e = edge(counter, switches, m["end_s"], settle_s)
            ref, unc = e["ref"] - b["ref"], b["unc_j"] + e["unc_j"]
            ok = math.isfinite(ref) and ref > 0 and math.isfinite(unc) and m["settled"]
            valid = valid and ok
            row[k] = {"energy_j": m["energy_j"], "ref_j": ref, "unc_j": unc, "models": f"{b['model']}/{e['model']}",
                      "switch_edges": int(b["switch"]) + int(e["switch"]),
                      "error_pct": 100 * (m["energy_j"] / ref - 1) if ok else float("nan"),
                      "unc_pct": 100 * unc / ref if ok else float("nan"),
                      "beyond": ok and abs(m["energy_j"] - ref) > 2 * unc, "anchored": m.get("anchored")}
        row["valid"] = valid
        rows.append(row)
    return data, rows


def in_group(row, group):
    if group.endswith(", held"):
        return row["kind"] == group[: -len(", held")] and row["a"]["models"] == "held/held"
    if group == "step, stall":
        return row["kind"] == "step" and row["stall_s"] > 0
    if group == "step, no stall":
        return row["kind"] == "step" and not row["stall_s"]
    return row["kind"] == group


def summarise(rows, group):
    every = [r for r in rows if in_group(r, group)]
    sel = [r for r in every if r["valid"]]
    out = {"group": group, "windows": len(every), "count": len(sel), "skipped": len(every) - len(sel)}
    if not sel:
        return out
    # The reference's uncertainty: at A's edges (B's are microseconds later).
    unc = [r["a"]["unc_pct"] for r in sel]
    out.update(ref_unc_pct_median=statistics.median(unc), ref_unc_pct_mean=statistics.mean(unc),
               a_closer=sum(abs(r["a"]["error_pct"]) < abs(r["b"]["error_pct"]) for r in sel),
               held_edges_pct=100 * sum(r["a"]["models"].count("held") for r in sel) / (2 * len(sel)),
               switch_edges_pct=100 * sum(r["a"]["switch_edges"] for r in sel) / (2 * len(sel)))
    for k in "ab":
        errors = [r[k]["error_pct"] for r in sel]
        out[k] = {"mean_pct": statistics.mean(errors), "mean_abs_pct": statistics.mean(abs(x) for x in errors),
                  "max_abs_pct": max(abs(x) for x in errors), "count": len(errors),
                  "beyond_2u": sum(r[k]["beyond"] for r in sel),
                  "anchored": sum(bool(r[k]["anchored"]) for r in sel)}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON, not a table")
    parser.add_argument("--rows", action="store_true", help="--json: each window's figures too")
    parser.add_argument("--settle-s", type=float, default=0.5,
                        help="how long the power takes to settle after the load switches")
    parser.add_argument("--wide", action="store_true",
                        help="the file-wide power bound at linear edges with a switch in their steps")
    args = parser.parse_args()
    results = []
    for path in args.files:
        data, rows = analyse(path, args.settle_s, args.wide)
        setup = data["setup"]
        mode = setup["mode"]
        kinds = GROUPS.get(mode, []) + sorted({r["kind"] for r in rows} - set(GROUPS.get(mode, [])))
        result = {"file": path, "mode": mode, "wide": args.wide, "gpu": setup.get("name"),
                  "driver": setup.get("driver"),
                  "joule_version": setup.get("joule_version"),
                  "monitors": {k: {"sample_response": d.get("sample_response"), "methods_seen": d.get("methods_seen"),
                                   "method_description": d.get("method_description", d.get("energy_method"))}
                               for k, d in data["monitors"].items()},
                  "groups": [summarise(rows, g) for g in kinds]}
        if args.rows:
            result["rows"] = rows
        results.append(result)
    if args.json:
        def finite(x):  # strict JSON: null for what is not a number
            if isinstance(x, dict):
                return {k: finite(v) for k, v in x.items()}
            if isinstance(x, list):
                return [finite(v) for v in x]
            return None if isinstance(x, float) and not math.isfinite(x) else x

        print(json.dumps(finite(results), indent=1))
        return

    def cells(s, k):
        if k not in s:
            return "| - | - | - | - "
        a = s[k]
        return f"| {a['mean_pct']:+.2f} | {a['mean_abs_pct']:.2f} | {a['max_abs_pct']:.2f} | {a['beyond_2u']} "

    print("| file | kind | n (skipped) | ref unc % median (mean) | held / switch edges | A mean % | A mean abs % | "
          "A max abs % | A >2u | B mean % | B mean abs % | B max abs % | B >2u | A closer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        for s in result["groups"]:
            if not s["windows"]:
                continue
            ref = (f"{s['ref_unc_pct_median']:.2f} ({s['ref_unc_pct_mean']:.2f})" if s["count"] else "-")
            held = f"{s['held_edges_pct']:.0f}% / {s['switch_edges_pct']:.0f}%" if s["count"] else "-"
            closer = f"{s['a_closer']}/{s['count']}" if s["count"] else "-"
            print(f"| {result['file']} | {s['group']} | {s['count']} ({s['skipped']}) | {ref} | {held} "
                  f"{cells(s, 'a')}{cells(s, 'b')}| {closer} |")
    print()
    for result in results:
        mons = "; ".join(f"{k.upper()}: sample_response={d['sample_response']}, methods {d['methods_seen']} "
                         f"({d['method_description']})" for k, d in result["monitors"].items())
        print(f"- {result['file']}: {result['mode']}, {result['gpu']}, driver {result['driver']}, joule "
              f"{result['joule_version']}; {mons}")


if __name__ == "__main__":
    main()
