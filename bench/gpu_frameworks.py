#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The framework examples (examples/hf_trainer, lightning, accelerate) run for real, read-only.

For each example:
  (a) energy: one run under `joule measure --json --timeline` (the installed
      program). The example's own figure (joule's callback / window, over its
      training span) is compared with joule measure's energy over the same
      span. joule measure's window covers the whole process (interpreter
      start-up, imports, model build, exit), so its total is not comparable
      as is; the span is cut out of its timeline instead: the example stamps
      its training span with time.monotonic() after a CUDA sync at both ends
      (CLOCK_MONOTONIC, the clock joule's timeline counts from its own start,
      taken here just before joule measure is spawned), and the timeline's
      power readings (NVML power usage: the mean over the trailing second,
      updated every ~100 ms on Hopper) are turned into the energy over
      [b, e] exactly for a trailing-one-second mean: sum of readings one
      second apart from each edge towards the middle, plus the few tenths of
      a second left over in the middle of training at the readings' mean
      there. That is scaled by joule measure's whole-run energy over the
      timeline's integral over the same whole-run window (joule measure's
      own counter-calibrated figure, apportioned by the readings): the
      "reference". Also reported: the unscaled figure, a naive integral of
      the readings over the span moved by half a second, and how much the
      reference moves if the alignment is off by 50 ms.
  (b) overhead: runs with joule's integration and with --no-joule, interleaved
      (no, joule, no, joule, ...), each example timing every step itself the
      same way in both; the median step period after the first 2 s of each
      run, per run and pooled.
  (b') overhead side by side in one process (--ab-seconds > 0, the
      headline figure): one run with --joule-ab BLOCK, where joule's per-step
      hooks work only in half the blocks of BLOCK steps (groups of four
      blocks, on off off on or off on on off, drawn at random so that a
      slow step recurring every epoch falls on both sides alike); each
      group of four blocks gives one ratio (on blocks' mean step over off
      blocks'), whose mean over the run, with a bootstrap 95% interval, is
      the per-step overhead. Runs of a process differ from each other by
      more than the 0.5% target (cuDNN's choices, allocator layout, clocks);
      blocks of one process do not. What every step of the run pays alike
      (joule's sampler thread) is not in it: (b) bounds that.
  (c) what was logged: TensorBoard tags (and how many points each), the
      CSV columns (Lightning's CSVLogger), joule's files in the output dir.

Writes OUT_DIR/frameworks.json and OUT_DIR/summary.md; exits 1 only if a run
crashed (targets missed are reported in the summary, not in the exit status).

  /tmp/joule-venv/bin/python bench/gpu_frameworks.py --out-dir OUT
(joule installed by bench/gpu_install.sh, as bench/gpu_frameworks.sh does; --joule
defaults to the program the installed package carries, else joule on PATH).
"""
import argparse
import bisect
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

EXAMPLES = ("hf_trainer", "lightning", "accelerate")
TARGET_ENERGY = 0.01  # |example - reference| / reference
TARGET_OVERHEAD = 0.005  # median step period with joule / without - 1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--joule", default=None,
                   help="the joule program (measure); default: the installed package's (joule/bin/joule), else on PATH")
    p.add_argument("--lib", default=None, help="LD_LIBRARY_PATH for the joule program alone (a build's own libraries)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--examples", default=",".join(EXAMPLES))
    p.add_argument("--script", action="append", default=[], metavar="NAME=PATH",
                   help="run PATH as example NAME (default examples/NAME/train.py)")
    p.add_argument("--measure-seconds", type=float, default=25.0, help="training time of the run under joule measure")
    p.add_argument("--overhead-seconds", type=float, default=10.0, help="training time of each overhead run")
    p.add_argument("--overhead-pairs", type=int, default=2, help="(no-joule, joule) pairs of runs, interleaved")
    p.add_argument("--ab-seconds", type=float, default=0.0,
                   help="training time of the one-process run with joule's hooks on and off in blocks (0: none)")
    p.add_argument("--ab-block", type=int, default=40, help="steps per block of that run")
    p.add_argument("--ab-kinds", default="joule", help="which kinds get such a run: joule, joule_sync, and "
                   "joule_null (the control: hooks on in every block, labels drawn alike; its estimate should be 0)")
    p.add_argument("--kinds", default="no_joule,joule",
                   help="run kinds interleaved in each round: no_joule, joule, joule_sync (every joule window edge "
                        "waiting for CUDA: shows what a per-step synchronisation would cost)")
    p.add_argument("--skip-s", type=float, default=2.0, help="step periods in each run's first seconds left out")
    p.add_argument("--interval-ms", type=float, default=10.0, help="joule measure's sampling interval (its timeline)")
    p.add_argument("--trailing-s", type=float, default=1.0, help="the power readings' trailing-mean length")
    p.add_argument("--measure-args", default="", help="more joule measure options, e.g. '--backend sim'")
    p.add_argument("--example-args", default="", help="more options for every example run, e.g. '--size tiny'")
    p.add_argument("--carbon-region", default="DEU", help="--carbon-region for the measured runs ('' for none)")
    p.add_argument("--timeout-s", type=float, default=240.0, help="per run")
    args = p.parse_args()
    if args.joule is None:
        args.joule = installed_joule_program()
        if args.joule is None:
            p.error("no joule package with its program in this Python, nor joule on PATH: install it "
                    "(bench/gpu_install.sh) or pass --joule")
    return args


def installed_joule_program():
    """The program the installed joule package carries (joule/bin/joule), else joule on PATH. The
    program itself rather than the venv's `joule` script: that script's Python start-up would fall
    between the clock taken here before joule measure is spawned and joule's own start."""
    try:
        from joule._cli import program_path
    except ImportError:
        return shutil.which("joule")
    path = program_path()
    return path if os.access(path, os.X_OK) else shutil.which("joule")


# -- running ----------------------------------------------------------------------------


def run(cmd, log_path, timeout_s, env=None):
    """Runs cmd, stdout+stderr to log_path; (exit status or None on timeout, seconds, monotonic at spawn)."""
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, env=env)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0, t0


def tail(path, n=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# -- (a) the span's energy from joule measure's timeline --------------------------------


def read_timeline(path):
    """{device: ([times], [powers])} for the GPU rows."""
    series = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if not row["device"].startswith("gpu"):
                continue
            t, p = series.setdefault(row["device"], ([], []))
            t.append(float(row["time_s"]))
            p.append(float(row["power_w"]))
    return series


def at(times, powers, t):
    """The readings linearly interpolated at t (held at the ends)."""
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return powers[0]
    if i >= len(times):
        return powers[-1]
    t0, t1 = times[i - 1], times[i]
    return powers[i - 1] + (powers[i] - powers[i - 1]) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)


def integral(times, powers, a, b):
    """Trapezoids of the interpolated readings over [a, b]."""
    if b <= a:
        return 0.0
    pts = [a] + [t for t in times if a < t < b] + [b]
    vals = [at(times, powers, t) for t in pts]
    return sum((pts[i + 1] - pts[i]) * (vals[i] + vals[i + 1]) / 2 for i in range(len(pts) - 1))


def span_energy(times, powers, b, e, trailing_s):
    """Energy over [b, e] from readings R(t) = mean power over [t - T, t]:
    sum_k T R(b + kT) covers [b, b + n1 T] exactly, sum_k T R(e - kT) covers
    [e - n2 T, e]; the gap left in the middle (< 2T) gets the readings' mean there."""
    T = trailing_s
    c = (b + e) / 2
    n1 = int((c - b) // T)
    n2 = int((e - c) // T)
    left = sum(T * at(times, powers, b + k * T) for k in range(1, n1 + 1))
    right = sum(T * at(times, powers, e - k * T) for k in range(0, n2))
    gap_a, gap_b = b + n1 * T, e - n2 * T
    # R(t) at t covers [t - T, t]: the gap's mean power is the reading at gap_b (covers [gap_b - T, gap_b]) and
    # around it; average a few readings inside the steady middle.
    mid = statistics.fmean(at(times, powers, gap_b + d) for d in (-0.5 * T, 0.0, 0.5 * T, T))
    return left + right + (gap_b - gap_a) * mid


def energy_comparison(example_result, measure_report, timeline_path, spawn_s, trailing_s):
    series = read_timeline(timeline_path)
    gpus = sorted(series)
    s = example_result.get("joule_summary") or {}
    # The span of joule's own training window (on time.monotonic()'s clock, from the example), else the
    # example's own synchronised stamps around its training.
    span = s.get("window_monotonic_s") or [example_result["train_begin_monotonic_s"],
                                           example_result["train_end_monotonic_s"]]
    b, e = span[0] - spawn_s, span[1] - spawn_s
    whole_j = sum(d["energy_j"] for d in measure_report["devices"] if d["kind"] == "gpu")
    elapsed = measure_report["elapsed_s"]

    def per_gpu(fn):
        return sum(fn(*series[g]) for g in gpus)

    # joule measure's window ends at its last samples (it settles, then stops the sampler): its whole-run
    # window on the timeline is [last - elapsed, last].
    last = max(series[g][0][-1] for g in gpus)
    whole_readings_j = per_gpu(lambda t, p: integral(t, p, last - elapsed, last))
    scale = whole_j / whole_readings_j if whole_readings_j > 0 else float("nan")
    readings_j = per_gpu(lambda t, p: span_energy(t, p, b, e, trailing_s))
    naive_j = per_gpu(lambda t, p: integral(t, p, b + trailing_s / 2, e + trailing_s / 2))
    shifted = [scale * per_gpu(lambda t, p: span_energy(t, p, b + d, e + d, trailing_s)) for d in (-0.05, 0.05)]
    example_j = s.get("energy_j")
    reference_j = scale * readings_j
    out = {
        "gpus": gpus,
        "span_on_timeline_s": [b, e],
        "span_s": e - b,
        "measure_whole_run_gpu_j": whole_j,
        "measure_elapsed_s": elapsed,
        "timeline_whole_run_j": whole_readings_j,
        "calibration": scale,
        "reference_span_j": reference_j,
        "readings_span_j": readings_j,
        "naive_span_j": naive_j,
        "reference_if_aligned_50ms_off_j": shifted,
        "span_from": "joule's window" if s.get("window_monotonic_s") else "the example's stamps",
        "example_j": example_j,
        "example_train_window_j": s.get("train_window_energy_j"),
        "example_elapsed_s": s.get("time_s"),
    }
    if example_j is not None and reference_j > 0:
        out["difference"] = example_j / reference_j - 1
        out["difference_unscaled"] = example_j / readings_j - 1 if readings_j > 0 else None
        out["difference_naive"] = example_j / naive_j - 1 if naive_j > 0 else None
        out["within_target"] = abs(out["difference"]) <= TARGET_ENERGY
        if s.get("train_window_energy_j"):
            out["difference_train_window"] = s["train_window_energy_j"] / reference_j - 1
    return out


# -- (b) step periods ---------------------------------------------------------------------


def step_stats(result, skip_s):
    periods = result.get("step_periods_s") or []
    kept, t = [], 0.0
    for p in periods:
        t += p
        if t > skip_s:
            kept.append(p)
    if not kept:
        kept = periods
    return {"steps": len(periods), "kept": len(kept),
            "median_s": statistics.median(kept) if kept else None,
            "mean_s": statistics.fmean(kept) if kept else None,
            "periods": kept}


def overhead(runs, kinds):
    """Pooled and per-run medians per kind; each kind with joule against no_joule."""
    out = {}
    for kind in kinds:
        rs = [r for r in runs if r["kind"] == kind and r.get("steps")]
        pooled = [p for r in rs for p in r["steps"]["periods"]]
        out[kind] = {"run_medians_ms": [r["steps"]["median_s"] * 1e3 for r in rs],
                     "run_means_ms": [r["steps"]["mean_s"] * 1e3 for r in rs],
                     "pooled_median_ms": statistics.median(pooled) * 1e3 if pooled else None,
                     "pooled_mean_ms": statistics.fmean(pooled) * 1e3 if pooled else None,
                     "steps": len(pooled)}
    b = out.get("no_joule", {})
    spread = b.get("run_medians_ms") or []
    out["no_joule_run_spread"] = (max(spread) - min(spread)) / statistics.median(spread) if len(spread) > 1 else None
    for kind in kinds:
        a = out[kind]
        if kind == "no_joule" or not (a["pooled_median_ms"] and b.get("pooled_median_ms")):
            continue
        a["overhead_median"] = a["pooled_median_ms"] / b["pooled_median_ms"] - 1
        a["overhead_mean"] = a["pooled_mean_ms"] / b["pooled_mean_ms"] - 1
        a["overhead_median_of_run_medians"] = (statistics.median(a["run_medians_ms"])
                                               / statistics.median(b["run_medians_ms"]) - 1)
        a["within_target"] = a["overhead_median"] <= TARGET_OVERHEAD
    return out


def ab_overhead(result, skip_s, resamples=4000):
    """The per-step overhead from one --joule-ab run: per group of four
    blocks (on off off on, or mirrored) the on blocks' mean step period over the off
    blocks' - 1; the mean over groups with a bootstrap 95% interval, and the
    same with block medians. A block's first step is left out (its period
    may hold the previous block's last hook), as are the first skip_s."""
    import random

    periods, states, block = result["step_periods_s"], result["step_joule_on"], result["joule_ab_block"]
    # periods[i] ends at step i + 1 (0-based), whose state is states[i + 1].
    blocks = {}
    t = 0.0
    for i, p in enumerate(periods):
        t += p
        step = i + 1
        if t <= skip_s or step % block == 0 or step >= len(states):
            continue
        blocks.setdefault(step // block, (states[step], []))[1].append(p)
    ratios, median_ratios = [], []
    for g in sorted({b // 4 for b in blocks}):
        members = [blocks.get(4 * g + k) for k in range(4)]
        if any(m is None or len(m[1]) < 2 for m in members):
            continue  # the run's last, unfinished group, or one cut by skip_s
        on = [m[1] for m in members if m[0]]
        off = [m[1] for m in members if not m[0]]
        if len(on) != 2 or len(off) != 2:
            continue
        ratios.append(statistics.fmean(statistics.fmean(x) for x in on)
                      / statistics.fmean(statistics.fmean(x) for x in off) - 1)
        median_ratios.append(statistics.fmean(statistics.median(x) for x in on)
                             / statistics.fmean(statistics.median(x) for x in off) - 1)
    out = {"block_steps": block, "groups": len(ratios), "steps": len(periods), "group_ratios": ratios,
           "overhead": None, "overhead_median": None, "interval": [None, None], "within_target": False}
    if len(ratios) < 2:
        return out
    rng = random.Random(1)
    means = sorted(statistics.fmean(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    on_steps = [p for b in blocks.values() if b[0] for p in b[1]]
    off_steps = [p for b in blocks.values() if not b[0] for p in b[1]]
    out.update(overhead=statistics.fmean(ratios), overhead_median=statistics.fmean(median_ratios),
               interval=[means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]],
               on_mean_ms=statistics.fmean(on_steps) * 1e3, off_mean_ms=statistics.fmean(off_steps) * 1e3,
               on_median_ms=statistics.median(on_steps) * 1e3, off_median_ms=statistics.median(off_steps) * 1e3)
    out["within_target"] = out["overhead"] <= TARGET_OVERHEAD
    hooks = result.get("step_joule_hook_s")
    if hooks:
        on_hooks = [h for h, on in zip(hooks, states) if on]
        out["hook_us_per_on_step"] = {"mean": statistics.fmean(on_hooks) * 1e6, "median": statistics.median(on_hooks) * 1e6,
                                      "p99": sorted(on_hooks)[int(0.99 * (len(on_hooks) - 1))] * 1e6}
        out["hook_share_of_step"] = statistics.fmean(on_hooks) / (out["off_mean_ms"] / 1e3)
    return out


# -- (c) what was logged ------------------------------------------------------------------


def tensorboard_tags(root):
    """{run dir: {tag: [points, last value]}} for every event file under root."""
    dirs = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(root, "**", "events.out.tfevents.*"), recursive=True)})
    if not dirs:
        return {}
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        return {d: f"(tensorboard not importable: {e})" for d in dirs}
    out = {}
    for d in dirs:
        acc = EventAccumulator(d, size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        tags = {}
        for tag in acc.Tags().get("scalars", []):
            events = acc.Scalars(tag)
            tags[tag] = [len(events), events[-1].value if events else None]
        for tag in acc.Tags().get("tensors", []):  # transformers may write text (hparams, args) as tensors
            tags.setdefault(tag, [len(acc.Tensors(tag)), "tensor"])
        out[os.path.relpath(d, root)] = tags
    return out


def csv_columns(root):
    """{metrics.csv: {column: [non-empty rows, last value]}}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "metrics.csv"), recursive=True)):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        cols = {}
        for c in (rows[0].keys() if rows else []):
            vals = [r[c] for r in rows if r.get(c) not in ("", None)]
            cols[c] = [len(vals), vals[-1] if vals else None]
        out[os.path.relpath(path, root)] = cols
    return out


def joule_files(root):
    """joule's own files in the output dir (everything JSON but the example's result)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*.json"), recursive=True)):
        if os.path.basename(path) == "example_result.json":
            continue
        data = load_json(path)
        out[os.path.relpath(path, root)] = sorted(data) if isinstance(data, dict) else type(data).__name__
    return out


# -- the whole run ------------------------------------------------------------------------


def gpu_settings():
    """Power limit and application clocks per GPU (to show nothing was changed)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=index,name,power.limit,clocks.applications.graphics,"
                               "clocks.applications.memory", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"(nvidia-smi: {e})"


def versions():
    out = {"python": sys.version.split()[0]}
    for m in ("torch", "transformers", "lightning", "accelerate", "tensorboard"):
        try:
            out[m] = __import__(m).__version__
        except Exception as e:  # noqa: BLE001 - report whatever stops it
            out[m] = f"(not importable: {type(e).__name__})"
    return out


def main():
    args = parse_args()
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    scripts = {name: f"examples/{name}/train.py" for name in EXAMPLES}
    scripts.update(dict(s.split("=", 1) for s in args.script))
    names = [n for n in args.examples.split(",") if n]
    joule_bin = os.path.abspath(args.joule)
    if args.carbon_region:
        try:
            import joule

            if not hasattr(joule, "Carbon"):
                print("joule.Carbon is not there yet: the measured runs go without --carbon-region", flush=True)
                args.carbon_region = ""
        except ImportError:
            pass
    report = {"versions": versions(), "gpu_settings_before": gpu_settings(), "args": vars(args), "examples": {}}
    crashed = []
    for name in names:
        script = scripts[name]
        base = os.path.join(out_dir, name)
        os.makedirs(base, exist_ok=True)
        ex = report["examples"][name] = {}
        extra = args.example_args.split()
        # (a) the run under joule measure
        d = os.path.join(base, "measured")
        cmd = [joule_bin, "measure", "--json", "-o", os.path.join(base, "measure.json"), "--interval-ms",
               str(args.interval_ms), "--timeline", os.path.join(base, "timeline.csv")] + args.measure_args.split()
        # --lib's libraries are for joule alone: the example's Python gets the environment it had.
        orig = os.environ.get("LD_LIBRARY_PATH")
        child_env = ["env", f"LD_LIBRARY_PATH={orig}"] if orig is not None else ["env", "-u", "LD_LIBRARY_PATH"]
        cmd += ["--"] + child_env + [sys.executable, script, "--seconds", str(args.measure_seconds), "--out-dir", d] + extra
        if args.carbon_region:
            cmd += ["--carbon-region", args.carbon_region]
        print(f"== {name}: under joule measure, {args.measure_seconds:g} s of training", flush=True)
        env = dict(os.environ)
        if args.lib:
            env["LD_LIBRARY_PATH"] = os.path.abspath(args.lib) + (":" + orig if orig else "")
        rc, wall, spawn = run(cmd, os.path.join(base, "measured.log"), args.timeout_s, env=env)
        ex["measured_run"] = {"exit_status": rc, "wall_s": wall, "log_tail": tail(os.path.join(base, "measured.log"))}
        result = load_json(os.path.join(d, "example_result.json"))
        measure = load_json(os.path.join(base, "measure.json"))
        if rc != 0 or result is None or measure is None:
            crashed.append(f"{name} (under joule measure: exit {rc})")
            print(ex["measured_run"]["log_tail"], flush=True)
        else:
            ex["joule_summary"] = result.get("joule_summary")
            ex["model"] = result.get("model")
            ex["device"] = result.get("device")
            ex["measured_steps"] = result.get("steps")
            try:
                ex["energy"] = energy_comparison(result, measure, os.path.join(base, "timeline.csv"), spawn,
                                                 args.trailing_s)
            except Exception as e:  # noqa: BLE001 - reported, the other parts go on
                ex["energy"] = {"error": f"{type(e).__name__}: {e}"}
            ex["measure_report"] = measure
            tb = tensorboard_tags(d)
            elsewhere = result.get("tensorboard_dir")
            if elsewhere and not os.path.abspath(elsewhere).startswith(d + os.sep):
                tb.update({os.path.abspath(elsewhere) + "/" + k: v for k, v in tensorboard_tags(elsewhere).items()})
            ex["logged"] = {"tensorboard": tb, "csv": csv_columns(d), "joule_files": joule_files(d)}
            print(json.dumps({k: ex["energy"].get(k) for k in ("example_j", "reference_span_j", "difference",
                                                                "difference_unscaled", "difference_naive")}), flush=True)
        # (b) interleaved runs with and without joule
        runs = []
        kinds = [k for k in args.kinds.split(",") if k]
        kind_flags = {"no_joule": ["--no-joule"], "joule": [], "joule_sync": ["--joule-sync"],
                      "joule_null": ["--joule-ab-null"]}  # joule_null: the A/A control of an --ab run
        for i in range(args.overhead_pairs):
            for kind in kinds:
                d = os.path.join(base, f"overhead-{i}-{kind}")
                cmd = [sys.executable, script, "--seconds", str(args.overhead_seconds), "--out-dir", d,
                       "--no-tensorboard"] + extra + kind_flags[kind]
                print(f"== {name}: overhead run {i} {kind}", flush=True)
                rc, wall, _ = run(cmd, d + ".log", args.timeout_s)
                r = load_json(os.path.join(d, "example_result.json"))
                entry = {"kind": kind, "exit_status": rc, "wall_s": wall}
                if rc != 0 or r is None:
                    crashed.append(f"{name} (overhead run {i} {kind}: exit {rc})")
                    entry["log_tail"] = tail(d + ".log")
                    print(entry["log_tail"], flush=True)
                else:
                    entry["steps"] = step_stats(r, args.skip_s)
                    print(f"   median step {entry['steps']['median_s'] * 1e3:.3f} ms over {entry['steps']['kept']} steps",
                          flush=True)
                runs.append(entry)
        ex["overhead"] = overhead(runs, kinds)
        # (b') joule's per-step work on and off in blocks of one run
        if args.ab_seconds > 0:
            ex["ab"] = {}
            for kind in [k for k in args.ab_kinds.split(",") if k]:
                d = os.path.join(base, f"ab-{kind}")
                cmd = [sys.executable, script, "--seconds", str(args.ab_seconds), "--out-dir", d, "--no-tensorboard",
                       "--joule-ab", str(args.ab_block)] + extra + kind_flags[kind]
                print(f"== {name}: one run, joule's hooks on/off in blocks of {args.ab_block} steps ({kind})", flush=True)
                rc, wall, _ = run(cmd, d + ".log", args.timeout_s)
                r = load_json(os.path.join(d, "example_result.json"))
                if rc != 0 or r is None:
                    crashed.append(f"{name} (on/off run {kind}: exit {rc})")
                    print(tail(d + ".log"), flush=True)
                    ex["ab"][kind] = {"exit_status": rc, "log_tail": tail(d + ".log")}
                    continue
                a = ex["ab"][kind] = ab_overhead(r, args.skip_s)
                print(f"   overhead {pct(a.get('overhead'))} (95% {pct(a['interval'][0])} .. {pct(a['interval'][1])}), "
                      f"medians {pct(a.get('overhead_median'))}, {a['groups']} groups; inside joule's hooks "
                      f"{(a.get('hook_us_per_on_step') or {}).get('mean', float('nan')):.1f} us a step", flush=True)
        ex["overhead_runs"] = [{k: v for k, v in r.items() if k != "steps"} | (
            {"median_ms": r["steps"]["median_s"] * 1e3, "mean_ms": r["steps"]["mean_s"] * 1e3, "steps": r["steps"]["kept"]}
            if r.get("steps") else {}) for r in runs]
    report["gpu_settings_after"] = gpu_settings()
    report["crashed"] = crashed
    with open(os.path.join(out_dir, "frameworks.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(summary_md(report, args))
    print(open(os.path.join(out_dir, "summary.md")).read())
    return 1 if crashed else 0


def pct(x, digits=2):
    return "n/a" if x is None else f"{100 * x:+.{digits}f}%"


def summary_md(report, args):
    v = report["versions"]
    lines = ["# The framework examples on a GPU (read-only)", "",
             f"GPU before: `{report['gpu_settings_before']}`; after: `{report['gpu_settings_after']}`"
             + (" (unchanged)" if report["gpu_settings_before"] == report["gpu_settings_after"] else " (CHANGED)"), "",
             "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), ""]
    lines += ["## Energy: the example's own figure vs joule measure over the same training span", "",
              "| example | model | span | example (joule in the run) | joule measure over the span | difference "
              "| run's outer window | unscaled | naive | reference if 50 ms off | whole run (joule measure) | target 1% |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, ex in report["examples"].items():
        e = ex.get("energy")
        if not e or "error" in e:
            lines.append(f"| {name} | {ex.get('model', '')} | | | | {(e or {}).get('error', 'no run')} | | | | | | MISS |")
            continue
        sh = e["reference_if_aligned_50ms_off_j"]
        lines.append(f"| {name} | {ex.get('model', '')} | {e['span_s']:.2f} s | {e['example_j']:.1f} J "
                     f"({e['example_elapsed_s']:.2f} s) | {e['reference_span_j']:.1f} J | **{pct(e.get('difference'))}** | "
                     f"{pct(e.get('difference_train_window'))} | {pct(e.get('difference_unscaled'))} | {pct(e.get('difference_naive'))} | "
                     f"{sh[0]:.1f} / {sh[1]:.1f} J | {e['measure_whole_run_gpu_j']:.1f} J in {e['measure_elapsed_s']:.1f} s "
                     f"(readings x{e['calibration']:.4f}) | {'ok' if e.get('within_target') else 'MISS'} |")
    lines += ["", "Reference: joule measure's whole-run GPU energy apportioned to the example's training span by its "
              f"timeline (power readings every {args.interval_ms:g} ms, a trailing {args.trailing_s:g} s mean, summed "
              "one second apart from each edge); unscaled: the readings alone; naive: the readings integrated over the "
              "span moved by half their trailing length. The example's figure is what joule's callback/window in the "
              "run reported for its training (its summary's energy_j: for the callbacks, the sum of their phase windows); "
              "run's outer window: the callbacks' one window around the whole run (train_window_energy_j) against the "
              "same reference.", ""]
    lines += ["## Overhead per step: with joule's integration vs --no-joule (interleaved runs)", "",
              "| example | kind | step (run medians) | pooled median | overhead (median) | overhead (mean) "
              "| target 0.5% |", "|---|---|---|---|---|---|---|"]
    for name, ex in report["examples"].items():
        o = ex.get("overhead") or {}
        for kind in [k for k in args.kinds.split(",") if k]:
            a = o.get(kind) or {}
            meds = ", ".join(f"{x:.3f}" for x in a.get("run_medians_ms", [])) + " ms"
            verdict = "" if kind == "no_joule" else ("ok" if a.get("within_target") else "MISS")
            extra = f" (spread of runs {pct(o.get('no_joule_run_spread'))})" if kind == "no_joule" else ""
            lines.append(f"| {name} | {kind}{extra} | {meds} | {a.get('pooled_median_ms') or 0:.3f} ms | "
                         f"**{pct(a.get('overhead_median'))}** | {pct(a.get('overhead_mean'))} | {verdict} |")
    lines += ["", f"Step period: time between consecutive step ends as the example sees them (the same code with and "
              f"without joule), first {args.skip_s:g} s of each run left out; {args.overhead_pairs} rounds of "
              f"{args.overhead_seconds:g} s runs, kinds interleaved. The mean includes the logging steps. joule_sync: "
              "joule's monitor made with synchronize=True (every window edge waits for CUDA).", ""]
    if any(ex.get("ab") for ex in report["examples"].values()):
        lines += ["## Overhead per step in one run: joule's hooks on and off in blocks", "",
                  "| example | kind | steps (groups) | step, hooks off (mean / median) | hooks on | overhead (mean) "
                  "| 95% interval | overhead (block medians) | inside joule's hooks (mean / median / p99 per step) "
                  "| target 0.5% |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, ex in report["examples"].items():
            for kind, a in (ex.get("ab") or {}).items():
                if a.get("overhead") is None:
                    lines.append(f"| {name} | {kind} | {a.get('steps', 0)} ({a.get('groups', 0)}) | | | n/a | | | | MISS |")
                    continue
                lo, hi = a["interval"]
                lines.append(f"| {name} | {kind} | {a['steps']} ({a['groups']}) | {a['off_mean_ms']:.3f} / "
                             f"{a['off_median_ms']:.3f} ms | {a['on_mean_ms']:.3f} / {a['on_median_ms']:.3f} ms | "
                             f"**{pct(a['overhead'])}** | {pct(lo)} .. {pct(hi)} | {pct(a['overhead_median'])} | "
                             + (f"{h['mean']:.1f} / {h['median']:.1f} / {h['p99']:.0f} us ({pct(a['hook_share_of_step'])}) | "
                                if (h := a.get('hook_us_per_on_step')) else "n/a | ")
                             + f"{'ok' if a['within_target'] else 'MISS'} |")
        lines += ["", f"One run of {args.ab_seconds:g} s per kind with `--joule-ab {args.ab_block}`: joule's per-step "
                  "hooks (and, in the Accelerate loop, the running estimate read on logging steps) work in blocks "
                  f"of {args.ab_block} steps, in groups of four ordered on off off on or off on on off at random; per group of four blocks, the on blocks' mean step over "
                  "the off blocks' - 1; mean over groups, bootstrap 95% interval. The run's own window and joule's "
                  "sampler thread are there in every block alike (the interleaved runs above include them). joule_null: "
                  "the control run, joule's hooks in every block and the blocks labelled alike (what the method reads "
                  "where there is no difference).", ""]
    lines += ["## What each logged (the run under joule measure)", ""]
    for name, ex in report["examples"].items():
        logged = ex.get("logged")
        lines.append(f"### {name}")
        if not logged:
            lines += ["(no run)", ""]
            continue
        for run_dir, tags in logged["tensorboard"].items():
            lines.append(f"- TensorBoard `{run_dir}`: " + (", ".join(f"`{t}` ({n[0]})" for t, n in tags.items())
                                                          if isinstance(tags, dict) else tags))
        for path, cols in logged["csv"].items():
            lines.append(f"- CSV `{path}`: " + ", ".join(f"`{c}` ({n[0]})" for c, n in cols.items()))
        for path, keys in logged["joule_files"].items():
            lines.append(f"- joule's `{path}`: keys " + (", ".join(f"`{k}`" for k in keys) if isinstance(keys, list) else keys))
        s = ex.get("joule_summary") or {}
        lines.append(f"- printed summary: " + ", ".join(f"{k} {val:.6g}" if isinstance(val, float) else f"{k} {val}"
                                                        for k, val in s.items() if not isinstance(val, (dict, list))))
        lines.append("")
    if report["crashed"]:
        lines += ["## Crashed", ""] + [f"- {c}" for c in report["crashed"]] + [""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
