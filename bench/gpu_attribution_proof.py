#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per region against ground truth on a real GPU (docs/attribution.md,
issue 32 part 4). Read-only: changes no GPU setting.

A synthetic model, torch.nn.Sequential of five known kernel patterns of very
different power, each a top-level child (so one "<name>.forward" region):

  matmul        bf16 N x N @ N x N (tensor cores, near the power limit)
  elementwise   x.mul_(a).add_(b) on a large tensor (memory-bound)
  reduction     sum / amax over a large tensor (read-bound)
  sleep         torch.cuda._sleep(cycles): one spinning kernel, near idle
  launch_storm  thousands of tiny add_ kernels (launch-bound, GPU mostly idle)

Each module's repeat count (the sleep's cycles) is calibrated with CUDA events
to --region-ms. A small token tensor passes through so Sequential works; each
module holds its own preallocated buffers; everything runs under no_grad.

Ground truth: each module alone, in a loop of --truth-seconds (after a
--truth-warmup-s warm-up) inside monitor windows, synchronised at both ends;
energy per call = the settled window's GPU energy (counter-anchored) / calls.
That includes the idle baseline during the call, as the attribution's
energy_per_call_j does. The loop is cut into --truth-parts windows whose
spread says how repeatable the truth is.

Mixed run: --seconds of steps back to back inside
joule.torch.attribute(model, monitor, depth=1, phases=False, clock="gpu") and
a monitor window; windows begun at the same instant end after 5, 10, 20, 40 s
(--checkpoints) for the convergence. Each is settled and attributed
(session.result). Per window and region: the error of the attributed energy
per call against the truth, and whether the truth lies inside the stated
interval ([energy_low_j, energy_high_j] / calls).

Targets (printed PASS/MISS; the script exits 0 either way, it is a
measurement): every region with >= 5% of the energy within 10% of its truth;
the regions' energy plus the idle energy within 1% of the window's energy;
the truth inside the interval for >= 90% of regions.

Writes to --out-dir: result.json (everything raw), table.md, page.html (the
full window's joule.attribution.to_html), convergence.csv and, where matplotlib
imports, convergence.png. About 3 minutes with the defaults.

  /tmp/joule-venv/bin/python bench/gpu_attribution_proof.py --out-dir DIR
(joule installed there first: bench/gpu_install.sh dist /tmp/joule-venv; locally PYTHONPATH=build/python)
"""
import argparse
import collections
import csv
import json
import math
import os
import random
import statistics
import time

import torch

import joule
import joule.attribution
import joule.torch

REGIONS = ("matmul", "elementwise", "reduction", "sleep", "launch_storm")
DEFAULT_MS = "matmul=8,elementwise=6,reduction=5,sleep=5,launch_storm=8"
MIB = 1 << 20


# -- the synthetic model -------------------------------------------------------

def gpu_ms(fn, n=5):
    """Median GPU milliseconds of fn() over n calls, by CUDA events (one warm-up call)."""
    fn()
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


class Kernel(torch.nn.Module):
    """A known kernel pattern: unit() repeated `repeats` times; forward passes the token through."""

    def __init__(self):
        super().__init__()
        self.repeats = 1

    def unit(self):
        raise NotImplementedError

    def forward(self, token):
        for _ in range(self.repeats):
            self.unit()
        return token

    def calibrate(self, target_ms):
        """Sets repeats so that a call lasts about target_ms (two passes: launch-bound units time badly alone)."""
        self.repeats = 1
        ms = gpu_ms(lambda: self(None))
        self.repeats = max(1, round(target_ms / ms))
        ms = gpu_ms(lambda: self(None))
        self.repeats = max(1, round(self.repeats * target_ms / ms))
        return gpu_ms(lambda: self(None))


class Matmul(Kernel):
    def __init__(self, n):
        super().__init__()
        self.a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)

    def unit(self):
        torch.matmul(self.a, self.b, out=self.c)


class Elementwise(Kernel):
    def __init__(self, mib, dtype):
        super().__init__()
        numel = mib * MIB // torch.tensor([], dtype=dtype).element_size()
        self.x = torch.randn(numel, device="cuda", dtype=dtype)

    def unit(self):
        self.x.mul_(0.999).add_(0.001)  # converges to 1: no overflow however long it runs


class Reduction(Kernel):
    def __init__(self, mib):
        super().__init__()
        self.x = torch.randn(mib * MIB // 4, device="cuda", dtype=torch.float32)
        self.out = torch.empty(2, device="cuda", dtype=torch.float32)

    def unit(self):
        self.out[0] = self.x.sum()
        self.out[1] = self.x.amax()


class Sleep(Kernel):
    """One torch.cuda._sleep kernel of `cycles`, calibrated once by CUDA events."""

    def __init__(self):
        super().__init__()
        self.cycles = 1_000_000
        self.cycles_per_ms = math.nan

    def unit(self):
        torch.cuda._sleep(self.cycles)

    def calibrate(self, target_ms):
        self.repeats, self.cycles = 1, 10_000_000
        self.cycles_per_ms = self.cycles / gpu_ms(lambda: self(None))
        self.cycles = max(1, int(self.cycles_per_ms * target_ms))
        return gpu_ms(lambda: self(None))


class LaunchStorm(Kernel):
    def __init__(self, numel):
        super().__init__()
        self.x = torch.zeros(numel, device="cuda", dtype=torch.float32)

    def unit(self):
        self.x.add_(1.0)


def build_model(args):
    modules = {
        "matmul": Matmul(args.matmul_n),
        "elementwise": Elementwise(args.elementwise_mib, getattr(torch, args.elementwise_dtype)),
        "reduction": Reduction(args.reduction_mib),
        "sleep": Sleep(),
        "launch_storm": LaunchStorm(args.storm_numel),
    }
    return torch.nn.Sequential(collections.OrderedDict((name, modules[name]) for name in REGIONS))


def calibrate(model, target_ms):
    """Per module: repeats, cycles (sleep) and measured ms per call; printed."""
    out = {}
    for name, module in model.named_children():
        ms = module.calibrate(target_ms[name])
        out[name] = {"target_ms": target_ms[name], "ms_per_call": ms, "repeats": module.repeats}
        if isinstance(module, Sleep):
            out[name].update(cycles=module.cycles, cycles_per_ms=module.cycles_per_ms)
        print(f"calibrated {name:12s}: {ms:6.2f} ms per call ({module.repeats} repeats)", flush=True)
    token = torch.zeros(1, device="cuda")
    step_ms = gpu_ms(lambda: model(token))
    print(f"step: {step_ms:.2f} ms", flush=True)
    return out, step_ms


# -- ground truth ----------------------------------------------------------------

def run_for(fn, seconds):
    """Calls fn() back to back for `seconds` of host time; the number of calls."""
    calls, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()
        calls += 1
    return calls


def gpu_energy(measurement, gpu):
    return measurement.gpu_energy_j[gpu]


def measured_window(monitor, name, fn, seconds, gpu):
    """(calls, energy J, elapsed s, settled measurement) of fn() looped in one synchronised window."""
    torch.cuda.synchronize()
    monitor.begin_window(name)
    calls = run_for(fn, seconds)
    torch.cuda.synchronize()
    m = monitor.settle(monitor.end_window(name), timeout_s=5.0)
    return calls, gpu_energy(m, gpu), m.elapsed_s, m


def ground_truth(monitor, name, module, args):
    """One module alone: energy and time per call, from --truth-parts windows."""
    token = torch.zeros(1, device="cuda")
    run_for(lambda: module(token), args.truth_warmup_s)
    parts = []
    for i in range(args.truth_parts):
        calls, energy, elapsed, m = measured_window(monitor, f"truth-{name}-{i}", lambda: module(token),
                                                    args.truth_seconds / args.truth_parts, args.gpu)
        parts.append({"calls": calls, "energy_j": energy, "elapsed_s": elapsed, "settled": m.settled,
                      "energy_per_call_j": energy / calls, "sources": sources(m),
                      "samples": monitor.observed_power(args.gpu, m.begin_s, m.end_s)})
    calls = sum(p["calls"] for p in parts)
    energy = sum(p["energy_j"] for p in parts)
    elapsed = sum(p["elapsed_s"] for p in parts)
    per_call = [p["energy_per_call_j"] for p in parts]
    truth = {"calls": calls, "energy_j": energy, "elapsed_s": elapsed, "energy_per_call_j": energy / calls,
             "time_per_call_s": elapsed / calls, "power_w": energy / elapsed,
             "part_spread": (max(per_call) - min(per_call)) / statistics.mean(per_call), "parts": parts}
    print(f"truth {name:12s}: {truth['energy_per_call_j']:8.4f} J/call, {1e3 * truth['time_per_call_s']:6.2f} ms/call, "
          f"{truth['power_w']:6.1f} W ({calls} calls, parts spread {100 * truth['part_spread']:.2f}%)", flush=True)
    return truth


def sources(m):
    return [{"method": s.method, "calibration_scale": s.calibration_scale, "counter_anchored": s.counter_anchored}
            for s in m.gpu_sources]


def idle_power(monitor, seconds, gpu):
    torch.cuda.synchronize()
    monitor.begin_window("idle")
    time.sleep(seconds)
    m = monitor.settle(monitor.end_window("idle"), timeout_s=5.0)
    return gpu_energy(m, gpu) / m.elapsed_s


# -- the mixed run -----------------------------------------------------------------

def mixed_run(monitor, model, args):
    """Steps for --seconds inside the session and windows ending at each checkpoint and at the end.
    [(seconds, steps, measurement)], longest last, and the session."""
    token = torch.zeros(1, device="cuda")
    checkpoints = sorted(c for c in args.checkpoints if c < args.seconds)
    names = [f"mixed-{c:g}s" for c in checkpoints] + ["mixed"]
    ended, steps = [], 0
    with joule.torch.attribute(model, monitor, depth=1, phases=False, clock=args.clock,
                               read_counter=args.read_counter) as session:
        model(token)  # the first call outside any window: hooks, events
        torch.cuda.synchronize()
        for name in reversed(names):  # the full window first: it pins the history the others need
            monitor.begin_window(name)
        start = time.perf_counter()
        while True:
            model(token)
            steps += 1
            if args.jitter_ms > 0:
                time.sleep(random.uniform(0, args.jitter_ms) / 1e3)
            elapsed = time.perf_counter() - start
            while checkpoints and elapsed >= checkpoints[0]:
                torch.cuda.synchronize()
                ended.append((checkpoints.pop(0), steps, monitor.end_window(names[len(ended)])))
            if elapsed >= args.seconds:
                break
        torch.cuda.synchronize()
        ended.append((args.seconds, steps, monitor.end_window("mixed")))
    # The full window first (it waits for the data covering its end); the
    # others ended earlier and are pinned by it.
    full = monitor.settle(ended[-1][2], timeout_s=5.0)
    settled = [(s, n, monitor.settle(m, timeout_s=5.0)) for s, n, m in ended[:-1]] + [(ended[-1][0], steps, full)]
    print(f"mixed run: {steps} steps in {full.elapsed_s:.1f} s, {gpu_energy(full, args.gpu):.0f} J", flush=True)
    return settled, session


def attribute_all(session, windows, args, baseline_w):
    options = {"bootstrap_rounds": args.bootstrap_rounds, "confidence": args.confidence,
               "sample_cover_ms": args.sample_cover_ms, "sample_response": args.response}
    if baseline_w is not None:
        options["baseline_w"] = baseline_w
    out, errors = [], []
    for seconds, steps, m in windows:
        t = time.perf_counter()
        try:
            a = session.result(m, **options)[args.gpu]
        except Exception as e:  # noqa: BLE001 - a window that cannot be attributed is a result too
            samples = session.monitor.observed_power(args.gpu, m.begin_s, m.end_s)
            print(f"attributing {m.name} failed: {e!r} ({len(samples)} samples in [{m.begin_s:.3f}, {m.end_s:.3f}] s, "
                  f"first at {samples[0][0] if samples else float('nan'):.3f} s, clock now "
                  f"{session.recorder.clock_s():.3f} s; warnings: {m.warnings}, sources: {m.gpu_sources})",
                  flush=True)
            errors.append({"window": m.name, "error": repr(e)})
            continue
        print(f"attributed {m.name} ({steps} steps) in {time.perf_counter() - t:.1f} s", flush=True)
        out.append({"seconds": seconds, "steps": steps, "measurement": m, "attribution": a})
    return out, errors


# -- comparison and checks ------------------------------------------------------------

def region_name(region):
    return region.name[:-len(".forward")] if region.name.endswith(".forward") else region.name


def leave_one_out(monitor, model, args):
    """Each module's energy per step in the mix: the step's energy per step
    minus that of the step without it (each looped --loo-seconds in a window).
    Independent of the attribution, and of how a module behaves alone (under
    the power limit a matmul alone is throttled, between lighter kernels not).

    --loo-repeats K: the full step and every step-without-one measured K
    times in turn (the full step also once more at the end), so each truth
    has K values, each against the mean of the full steps around it: their
    spread is the truth's own error. --loo-pairs: the steps without each pair
    too, once a round: a pair's truth against the sum of its two truths is the
    pair's interaction. The extra figures go under "_"-prefixed keys."""
    token = torch.zeros(1, device="cuda")
    names = [n for n, _ in model.named_children()]

    def per_step(net):
        run_for(lambda: net(token), 1.0)  # warm
        calls, energy, _, _ = measured_window(monitor, "loo", lambda: net(token), args.loo_seconds, args.gpu)
        return energy / calls

    def without(*left_out):
        return torch.nn.Sequential(collections.OrderedDict(
            (n, m) for n, m in model.named_children() if n not in left_out))

    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]] if args.loo_pairs else []
    fulls, alone_out, pair_out = [], {n: [] for n in names}, {p: [] for p in pairs}
    for _ in range(args.loo_repeats):
        fulls.append(per_step(model))
        for name in names:
            alone_out[name].append(per_step(without(name)))
        for pair in pairs:
            pair_out[pair].append(per_step(without(*pair)))
    fulls.append(per_step(model))
    out = truths_from_rounds(fulls, alone_out)
    for name in names:
        print(f"in the mix {name:12s}: {out[name]:8.4f} J/step (repeats "
              f"{', '.join(f'{v:.4f}' for v in out['_repeats_j'][name])}; full step "
              f"{', '.join(f'{f:.4f}' for f in fulls)} J: truths +-{out['error_j']:.4f} J)", flush=True)
    around = around_rounds(fulls)
    if pairs:
        out["_pairs"] = {}
        for a, b in pairs:
            pair_j = statistics.mean(f - w for f, w in zip(around, pair_out[(a, b)]))
            out["_pairs"][f"{a}+{b}"] = {"pair_j": pair_j, "sum_j": out[a] + out[b],
                                         "interaction_j": pair_j - out[a] - out[b]}
            print(f"in the mix {a}+{b}: {pair_j:.4f} J/step against {out[a] + out[b]:.4f} J/step for the two "
                  f"alone: interaction {pair_j - out[a] - out[b]:+.4f} J", flush=True)
    return out


def around_rounds(fulls):
    """The full step's J per step around each round: the mean of the windows before and after it."""
    return [(fulls[k] + fulls[k + 1]) / 2 for k in range(len(fulls) - 1)]


def truths_from_rounds(fulls, without):
    """Truths in the mix from leave-one-out rounds: fulls, the full step's J
    per step before each round and once after the last; without[name], the
    step's without it, one per round. Per name: the mean over rounds of the
    full step around the round less the step without it; "_repeats_j" those
    values, "_spread_j" their standard error; "error_j" the full step's own
    spread (how far a truth, a difference of two windows, may be off from the
    GPU's drift alone)."""
    around = around_rounds(fulls)
    out = {"error_j": max(fulls) - min(fulls), "_full_step_j": fulls, "_repeats_j": {}, "_spread_j": {}}
    for name, steps_j in without.items():
        values = [f - w for f, w in zip(around, steps_j)]
        out[name] = statistics.mean(values)
        out["_repeats_j"][name] = values
        out["_spread_j"][name] = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return out


def compare(a, truth, in_mix=None):
    """Per region of one attribution: attributed vs truth (alone, and in the mix by leaving it out), per call."""
    rows = []
    for r in a.regions:
        name = region_name(r)
        t = truth.get(name)
        if t is None or r.calls == 0:
            continue
        per_call = r.energy_per_call_j
        low, high = r.energy_low_j / r.calls, r.energy_high_j / r.calls
        true = t["energy_per_call_j"]
        finite = all(math.isfinite(x) for x in (low, high))
        rows.append({
            "region": name, "resolved": r.resolved, "calls": r.calls, "share": r.share,
            "energy_per_call_j": per_call, "truth_per_call_j": true,
            "error": per_call / true - 1 if math.isfinite(per_call) else math.nan,
            "low_per_call_j": low, "high_per_call_j": high,
            "half_width": (high - low) / 2 / per_call if finite and per_call > 0 else math.nan,
            "truth_inside": bool(finite and low <= true <= high),
            "gpu_time_per_call_s": r.gpu_time_s / r.calls, "truth_time_per_call_s": t["time_per_call_s"],
            "power_w": r.power_w, "truth_power_w": t["power_w"],
            "power_error": r.power_w / t["power_w"] - 1 if math.isfinite(r.power_w) else math.nan,
        })
        if in_mix and name in in_mix:
            mix, u = in_mix[name], in_mix["error_j"]
            rows[-1].update({"in_mix_per_call_j": mix, "error_in_mix": per_call / mix - 1,
                             "in_mix_inside": bool(finite and low <= mix <= high), "in_mix_error_j": u,
                             "in_mix_inside_within_its_error": bool(finite and low - u <= mix <= high + u)})
    return rows


def checks(a, rows, args):
    large = [r for r in rows if math.isfinite(r["share"]) and r["share"] >= args.min_share]
    worst = max((abs(r["error"]) if math.isfinite(r["error"]) else math.inf for r in large), default=math.nan)
    parts = sum(r.energy_j for r in a.regions if math.isfinite(r.energy_j)) + a.idle_energy_j
    sum_error = parts / a.window_energy_j - 1
    inside = sum(r["truth_inside"] for r in rows) / len(rows) if rows else math.nan
    return {
        "accuracy": {"pass": bool(large) and worst <= args.max_error, "worst_error": worst,
                     "regions": [r["region"] for r in large], "limit": args.max_error, "min_share": args.min_share},
        "sum": {"pass": abs(sum_error) <= 0.01, "regions_plus_idle_j": parts, "window_j": a.window_energy_j,
                "error": sum_error, "limit": 0.01},
        "honesty": {"pass": inside >= 0.9, "fraction_inside": inside, "regions": len(rows), "limit": 0.9},
        **in_mix_checks(rows, large, args),
    }


def in_mix_checks(rows, large, args):
    """The accuracy and honesty targets against the truths in the mix (leave-one-out), where measured."""
    if not rows or "error_in_mix" not in rows[0]:
        return {}
    worst = max((abs(r["error_in_mix"]) for r in large), default=math.nan)
    inside = sum(r["in_mix_inside"] for r in rows) / len(rows)
    loose = sum(r["in_mix_inside_within_its_error"] for r in rows) / len(rows)
    return {"accuracy_in_mix": {"pass": bool(large) and worst <= args.max_error, "worst_error": worst},
            "honesty_in_mix": {"pass": inside >= 0.9, "fraction_inside": inside,
                               "fraction_inside_within_the_truths_error": loose}}


def steps_needed(row, steps, precision):
    """Steps for an interval half-width of `precision`, scaling as 1/sqrt(steps) from this window."""
    w = row["half_width"]
    return math.ceil(steps * (w / precision) ** 2 - 1e-6) if math.isfinite(w) and w > 0 else None


# -- output ---------------------------------------------------------------------------

def pct(x, digits=1):
    return f"{100 * x:+.{digits}f}%" if math.isfinite(x) else "-"


def comparison_markdown(rows):
    out = ["| region | share | attributed J/call | truth J/call alone | error | in the mix J/call | error | "
           "interval J/call | alone / in the mix inside | GPU ms/call (alone) | power W (alone) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mix = r.get("in_mix_per_call_j", math.nan)
        out.append(f"| {r['region']}{'' if r['resolved'] else ' *'} | {100 * r['share']:.1f}% | "
                   f"{r['energy_per_call_j']:.4f} | {r['truth_per_call_j']:.4f} | {pct(r['error'])} | "
                   f"{mix:.4f} | {pct(r.get('error_in_mix', math.nan))} | "
                   f"[{r['low_per_call_j']:.4f}, {r['high_per_call_j']:.4f}] | "
                   f"{'yes' if r['truth_inside'] else 'NO'} / {'yes' if r.get('in_mix_inside') else 'NO'} | "
                   f"{1e3 * r['gpu_time_per_call_s']:.2f} ({1e3 * r['truth_time_per_call_s']:.2f}) | "
                   f"{r['power_w']:.1f} ({r['truth_power_w']:.1f}) |")
    return "\n".join(out)


def checks_lines(c):
    a, s, h = c["accuracy"], c["sum"], c["honesty"]
    word = {True: "PASS", False: "MISS"}
    return [
        f"{word[a['pass']]} accuracy: regions with >= {100 * a['min_share']:.0f}% of the energy "
        f"({', '.join(a['regions'])}) within {100 * a['limit']:.0f}% of truth: worst {100 * a['worst_error']:.2f}%",
        f"{word[s['pass']]} sum: regions + idle {s['regions_plus_idle_j']:.1f} J vs window {s['window_j']:.1f} J: "
        f"{pct(s['error'], 3)}",
        f"{word[h['pass']]} honesty: truth inside the {h['regions']} intervals for {100 * h['fraction_inside']:.0f}% "
        f"(>= {100 * h['limit']:.0f}%)",
    ] + ([f"{word[c['accuracy_in_mix']['pass']]} accuracy against the truths in the mix: worst "
          f"{100 * c['accuracy_in_mix']['worst_error']:.2f}%",
          f"{word[c['honesty_in_mix']['pass']]} honesty against the truths in the mix: "
          f"{100 * c['honesty_in_mix']['fraction_inside']:.0f}% inside "
          f"({100 * c['honesty_in_mix']['fraction_inside_within_the_truths_error']:.0f}% within the truths' own "
          "error)"] if "accuracy_in_mix" in c else [])


def convergence_rows(windows):
    return [{"seconds": w["seconds"], "steps": w["steps"], **{k: r[k] for k in
            ("region", "share", "error", "half_width", "truth_inside")}} for w in windows for r in w["rows"]]


def write_convergence(rows, out_dir):
    if not rows:
        return False
    with open(os.path.join(out_dir, "convergence.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, name in enumerate(REGIONS):
        mine = [r for r in rows if r["region"] == name]
        if not mine:
            continue
        steps = [r["steps"] for r in mine]
        color = f"C{i}"
        ax.plot(steps, [100 * abs(r["error"]) for r in mine], "o-", color=color, label=f"{name} |error|")
        ax.plot(steps, [100 * r["half_width"] for r in mine], "--", color=color, alpha=0.6)
    ax.axhline(10, color="gray", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("steps in the window (log)")
    ax.set_ylabel("% of the ground truth (solid: |error|, dashed: interval half-width)")
    ax.set_title("Energy per call: attribution vs ground truth")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "convergence.png"), dpi=120)
    return True


def write_page(a, path, title):
    joule.attribution.to_html([a], path, title=title, gpu_labels=["GPU 0"])


def write_outputs(args, report, full, windows):
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "result.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    md = ["# Energy attribution against ground truth", "", f"{report['gpu']}, torch {report['torch']}, "
          f"{full['steps']} steps in {full['seconds']:g} s", "", "## Full window", "", comparison_markdown(full["rows"]),
          "", *[f"- {line}" for line in checks_lines(full["checks"])], "", "## Convergence", "",
          "| seconds | steps | region | share | error | half-width | truth inside |", "|---|---|---|---|---|---|---|"]
    for r in report["convergence"]:
        md.append(f"| {r['seconds']:g} | {r['steps']} | {r['region']} | {100 * r['share']:.1f}% | {pct(r['error'])} | "
                  f"{'+-%.2f%%' % (100 * r['half_width']) if math.isfinite(r['half_width']) else '-'} | {'yes' if r['truth_inside'] else 'NO'} |")
    md += ["", "```", joule.attribution.format_table(full["attribution"], gpu_label="GPU 0"), "```", ""]
    with open(os.path.join(args.out_dir, "table.md"), "w") as f:
        f.write("\n".join(md))
    write_page(full["attribution"], os.path.join(args.out_dir, "page.html"),
               f"Synthetic model on {report['gpu']}: {full['steps']} steps")
    plotted = write_convergence(report["convergence"], args.out_dir)
    print(f"wrote {args.out_dir}/result.json, table.md, page.html, convergence.csv"
          f"{', convergence.png' if plotted else ' (no matplotlib: no plot)'}", flush=True)


# -- main ------------------------------------------------------------------------------

def parse_ms(text):
    ms = dict((k, float(v)) for k, v in (item.split("=") for item in text.split(",")))
    unknown = set(ms) - set(REGIONS)
    if unknown:
        raise SystemExit(f"--region-ms: unknown regions {sorted(unknown)}")
    return {**dict((k, float(v)) for k, v in (i.split("=") for i in DEFAULT_MS.split(","))), **ms}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="attribution-proof")
    p.add_argument("--seconds", type=float, default=60.0, help="the mixed run's length")
    p.add_argument("--checkpoints", type=lambda s: [float(x) for x in s.split(",")], default=[5, 10, 20, 40],
                   help="seconds at which the convergence windows end (comma-separated)")
    p.add_argument("--truth-seconds", type=float, default=8.0, help="each module's ground-truth loop")
    p.add_argument("--truth-warmup-s", type=float, default=1.0)
    p.add_argument("--truth-parts", type=int, default=2, help="windows the truth loop is cut into (its spread)")
    p.add_argument("--idle-seconds", type=float, default=2.0, help="idle power measured before the rest")
    p.add_argument("--region-ms", type=parse_ms, default=parse_ms(DEFAULT_MS),
                   help=f"target ms per call, e.g. {DEFAULT_MS}")
    p.add_argument("--matmul-n", type=int, default=8192)
    p.add_argument("--elementwise-mib", type=int, default=1024)
    p.add_argument("--elementwise-dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--reduction-mib", type=int, default=1024)
    p.add_argument("--storm-numel", type=int, default=256)
    p.add_argument("--jitter-ms", type=float, default=0.0, help="random host sleep 0..this between steps")
    p.add_argument("--clock", default="gpu", help="joule.torch.attribute's clock")
    p.add_argument("--bootstrap-rounds", type=int, default=200)
    p.add_argument("--confidence", type=float, default=0.9)
    p.add_argument("--sample-cover-ms", type=float, default=None, help="None: found by the fit")
    p.add_argument("--loo-seconds", type=float, default=5.0,
                   help="per leave-one-out window (the truths in the mix); 0: skip")
    p.add_argument("--loo-repeats", type=int, default=1, help="rounds of leave-one-out windows (the truths' spread)")
    p.add_argument("--loo-pairs", action="store_true", help="also leave out each pair of regions (their interaction)")
    p.add_argument("--response-seconds", type=float, default=40.0,
                   help="measure the samples' response first (joule.torch.measure_sample_response) and attribute "
                        "with it; 0: the boxcar found by the fit")
    p.add_argument("--read-counter", action="store_true",
                   help="read the energy counter once a step during the mixed run (joule.torch.attribute("
                        "read_counter=True)), fit its increments with the samples, and compare the full window "
                        "with and without them (result.json: variants)")
    p.add_argument("--baseline-from-idle", action="store_true",
                   help="give the measured idle power as baseline_w instead of estimating it")
    p.add_argument("--min-share", type=float, default=0.05)
    p.add_argument("--max-error", type=float, default=0.10)
    p.add_argument("--gpu", type=int, default=0, help="the monitor's GPU index (the one torch uses)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.cuda.set_device(args.gpu)
    monitor = joule.Monitor(interval_ms=100)
    with torch.no_grad():
        model = build_model(args)
        calibration, step_ms = calibrate(model, args.region_ms)
        idle_w = idle_power(monitor, args.idle_seconds, args.gpu)
        print(f"idle: {idle_w:.1f} W", flush=True)
        truth = {name: ground_truth(monitor, name, module, args) for name, module in model.named_children()}
    args.response = None
    if args.response_seconds > 0:
        response_raw = {}
        args.response = joule.torch.measure_sample_response(monitor, seconds=args.response_seconds, gpu=args.gpu,
                                                            raw=response_raw, keep=False)
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "response-raw.json"), "w") as f:
            json.dump(response_raw, f)
        print(f"sample response: {args.response!r}", flush=True)
    with torch.no_grad():
        windows, session = mixed_run(monitor, model, args)
    # Everything that reads the mixed run's power data, before the monitor's history moves past it.
    attributed, errors = attribute_all(session, windows, args, idle_w if args.baseline_from_idle else None)
    boxcar_a = (session.result(windows[-1][2], bootstrap_rounds=0, stored_response=False)[args.gpu]
                if args.response is not None else None)
    variants_a = counter_variants(session, windows[-1][2], args) if args.read_counter else {}
    write_raw(monitor, session, windows[-1][2], args)
    with torch.no_grad():
        in_mix = leave_one_out(monitor, model, args) if args.loo_seconds > 0 else None
    boxcar = None
    if boxcar_a is not None:  # the full window as the boxcar model sees it, for comparison
        boxcar = {"notes": list(boxcar_a.notes), "rows": compare(boxcar_a, truth, in_mix)}
        for row in boxcar["rows"]:
            print(f"boxcar model: {row['region']:12s} {100 * row['error']:+7.1f}% (alone), "
                  f"{100 * row.get('error_in_mix', math.nan):+7.1f}% (in the mix)", flush=True)
    variants = {}
    for key, a in variants_a.items():  # the full window with and without the counter's increments
        variants[key] = {"notes": list(a.notes), "observations": a.observations, "rows": compare(a, truth, in_mix)}
        print(f"{key}: " + ", ".join(f"{r['region']} {100 * r.get('error_in_mix', math.nan):+.1f}%"
                                     for r in variants[key]["rows"]) + " (in the mix)", flush=True)
    for w in attributed:
        w["rows"] = compare(w["attribution"], truth, in_mix)
        w["checks"] = checks(w["attribution"], w["rows"], args)
    report = {
        "gpu": torch.cuda.get_device_name(args.gpu), "torch": torch.__version__, "args": vars(args),
        "monitor_gpus": monitor.gpus, "clock_uncertainty_s": getattr(session, "clock_uncertainty_s", None),
        "session_notes": list(getattr(session, "notes", [])), "calibration": calibration, "step_ms": step_ms,
        "idle_w": idle_w, "truth": truth, "in_mix": in_mix, "errors": errors, "boxcar": boxcar,
        "variants": variants,
        "sample_response": args.response.to_dict() if args.response is not None else None,
        "windows": [window_report(w) for w in attributed], "convergence": convergence_rows(attributed),
    }
    full = attributed[-1] if attributed and attributed[-1]["measurement"].name == "mixed" else None
    if full is None:
        print("MISS: the full window could not be attributed; writing result.json only", flush=True)
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "result.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
        return
    report.update(summarise(attributed, full, args))
    write_outputs(args, report, full, attributed)


def counter_variants(session, m, args):
    """The full window attributed with and without the counter's increments, by the response (where measured)
    and by the boxcar found by the fit: {name: Attribution}."""
    out = {}
    models = [("response", {"sample_response": args.response})] if args.response is not None else []
    models.append(("boxcar", {"sample_cover_ms": args.sample_cover_ms}))
    for model, options in models:
        for counter in (True, False):
            key = f"{model}, {'with' if counter else 'without'} the counter"
            try:
                out[key] = session.result(m, bootstrap_rounds=args.bootstrap_rounds, confidence=args.confidence,
                                          counter_increments=counter, **options)[args.gpu]
            except Exception as e:  # noqa: BLE001 - reported, the rest goes on
                print(f"{key}: failed: {e!r}", flush=True)
    return out


def write_raw(monitor, session, m, args):
    """The full window's power data and region pieces, for fits of other models offline
    (bench/probes/sample_response.py --fit reads the same layout)."""
    os.makedirs(args.out_dir, exist_ok=True)
    raw = {"gpu": torch.cuda.get_device_name(args.gpu), "begin_s": m.begin_s, "end_s": m.end_s,
           "energy_j": gpu_energy(m, args.gpu), "samples": monitor.observed_power(args.gpu, m.begin_s, m.end_s),
           "counter": monitor.counter_values(args.gpu, m.begin_s, m.end_s),
           "intervals": session.recorder.intervals(m.begin_s, m.end_s)}
    with open(os.path.join(args.out_dir, "raw.json"), "w") as f:
        json.dump(raw, f)


def window_report(w):
    m = w["measurement"]
    return {"name": m.name, "seconds": w["seconds"], "steps": w["steps"], "elapsed_s": m.elapsed_s,
            "settled": m.settled, "gpu_energy_j": list(m.gpu_energy_j), "sources": sources(m),
            "warnings": list(m.warnings), "attribution": w["attribution"].to_dict(), "comparison": w["rows"],
            "checks": w["checks"]}


def summarise(attributed, full, args):
    """Prints the full window's table, the comparison and the checks; the pooled honesty and steps needed."""
    print()
    print(joule.attribution.format_table(full["attribution"], gpu_label=f"GPU {args.gpu}"))
    print(comparison_markdown(full["rows"]))
    print()
    for line in checks_lines(full["checks"]):
        print(line)
    pooled = [r for w in attributed for r in w["rows"]]
    inside = sum(r["truth_inside"] for r in pooled) / len(pooled) if pooled else math.nan
    print(f"honesty over all {len(attributed)} windows: truth inside {100 * inside:.0f}% of {len(pooled)} intervals")
    needed = {r["region"]: {f"{100 * p:g}%": steps_needed(r, full["steps"], p) for p in (0.01, 0.02, 0.05, 0.10)}
              for r in full["rows"]}
    for name, n in needed.items():
        print(f"steps for an interval of +-p on {name:12s}: " + ", ".join(f"{k}: {v}" for k, v in n.items()))
    return {"honesty_pooled": {"fraction_inside": inside, "intervals": len(pooled)}, "steps_needed": needed}

if __name__ == "__main__":
    main()
