#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per region of two real models against leave-one-out truths on a
real GPU: do joule's intervals hold the truth there, as they do on the
synthetic proof (issue 53, item 1; bench/README.md section 16j)? Read-only:
changes no GPU setting.

The models, in inference (eval, no_grad, bf16), regions at depth 1 with
phases=False (one "<path>.forward" region per child):

  resnet50  ResNet-50 (bench/ddp_train.py's, the same network as
            torchvision's), channels_last, batch --resnet-batch of 224 x 224.
            Regions: the stem's layers, the 16 bottlenecks, the pool, the fc.
  gpt       bench/gpt_model.py's SmallGPT, --gpt-layers blocks of
            --gpt-width, batch --gpt-batch x --gpt-tokens tokens. Regions:
            tok_emb, pos_emb, blocks.0..N-1, ln_f, head.

The controlled variants: a region whose output has its input's shape (a
bottleneck without a downsample, a GPT block) can be left out, replaced by
torch.nn.Identity, and the rest of the step does the same work. Its truth in
the mix is the step's energy per step less that of the step without it (each
looped --loo-seconds in a synchronised monitor window, counter-anchored);
--loo-repeats rounds, the full step measured before, between and after them,
so each truth has a spread (its own error). Where the step's energy wanders
from window to window (ResNet-50 training on an H200: 0.43% a window at the
same time and clock), a round's truth of a small module is off by 10-50%:
five rounds there (bench/README.md section 16n). The others (the stem, the head)
are attributed but have no truth.

Per run (--runs, seeds 1..K): --seconds of steps back to back inside
joule.torch.attribute and one window, attributed with the measured sample
response four ways: joule's defaults (the model's bias carried, identical
modules fitted with one power), the statistical intervals alone
(model_bias=0), the idle power measured first (--idle-seconds) given as
baseline_w, and each module fitted on its own (tie_identical=False; runs
stored before 2026-12-01 lack it, and their "default" is this). Per region
with a truth: the error and whether each interval holds the truth.

--loo-together: each round also leaves every such module out at once. Their
truth together against the sum of their single truths says whether
leave-one-out truths add up (a neighbour's interaction), and against the sum
of their estimates whether a fit's common error is the fit's or the truths'.

--train: training steps instead (forward, backward, an AdamW step; regions
in both phases, the optimizer's step its own), each module judged by its
total (Attribution.totals: its forward and backward, the interval the
sum's). Every gradient is allocated up front and zeroed in place, so a
left-out module's parameters are still stepped, with zero gradients.

The sample response is measured once (--response-seconds) or read from
--response (a result.json or response.json of an earlier run): the same GPU
model and driver.

Writes to --out-dir: response.json, per run <model>-run<K>/result.json and
raw.json (the layout of gpu_attribution_proof.py's, so
bench/probes/interval_coverage.py refits them), and summary.md / summary.json
over all runs.

  python3 bench/gpu_attribution_real_truths.py --models resnet50,gpt --runs 3 --out-dir truths
  python3 bench/gpu_attribution_real_truths.py --summarise truths/*-run* --out-dir all   # no GPU
(joule installed first: bench/gpu_install.sh dist /tmp/joule-venv; about 2.5 min a model a run)
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import time
import types

import torch
import torch.nn.functional as F

import joule
import joule.attribution
import joule.torch
import gpu_attribution_proof as proof  # beside this file
from ddp_train import builtin_resnet50
from gpt_model import SmallGPT

SUFFIX = ".forward"
# --loo-together: the truth of every module that can be left out, left out at once.
TOGETHER = "_all_left_out_together"


# -- the models, their steps and what can be left out ----------------------------------

class Workload:
    """A model, its input and target, the paths of the modules that can be
    left out, and its step: a forward in inference, or with --train a
    forward, a backward and an AdamW step. Every parameter's gradient is
    allocated up front and zeroed in place (set_to_none=False), so a
    left-out module's parameters keep zero gradients and the optimizer does
    the same work with or without it."""

    def __init__(self, model, x, target, loss, removable, train):
        self.model, self.x, self.target, self.loss, self.removable = model, x, target, loss, removable
        self.train = train
        self.optimizer = None
        # In a session, the loss goes in a region of its own, its backward
        # too (the modules' backward regions nest in it; its own time is
        # autograd's before the last module's output gradient arrives): time
        # outside regions is read as idle (the float cross-entropy over a
        # GPT's logits is ~6.7 ms of a 38.7 ms step at batch 16, its backward
        # ~13.6 ms of a 140 ms step at batch 64).
        self.region = lambda name: contextlib.nullcontext()
        if train:
            for p in model.parameters():
                p.grad = torch.zeros_like(p)
            self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, foreach=True)
        model.train(train)

    def step(self):
        if not self.train:
            return self.model(self.x)
        self.optimizer.zero_grad(set_to_none=False)
        out = self.model(self.x)
        with self.region("loss"):
            loss = self.loss(out, self.target)
            loss.backward()
        self.optimizer.step()

    def grad_mode(self):
        return contextlib.nullcontext() if self.train else torch.no_grad()


def resnet50(args):
    model = builtin_resnet50().cuda().to(memory_format=torch.channels_last, dtype=torch.bfloat16)
    x = torch.randn(args.resnet_batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    y = torch.randint(0, 1000, (args.resnet_batch,), device="cuda")
    removable = [name for name, m in model.named_children() if getattr(m, "downsample", False) is None]
    return Workload(model, x.to(memory_format=torch.channels_last), y,
                    lambda out, target: F.cross_entropy(out.float(), target), removable, args.train)


def gpt(args):
    model = SmallGPT(args.gpt_vocab, args.gpt_tokens, args.gpt_width, args.gpt_width // 64, args.gpt_layers)
    model = model.cuda().to(torch.bfloat16)
    x = torch.randint(0, args.gpt_vocab, (args.gpt_batch, args.gpt_tokens), device="cuda")
    y = torch.randint(0, args.gpt_vocab, (args.gpt_batch, args.gpt_tokens), device="cuda")
    return Workload(model, x, y, lambda out, target: F.cross_entropy(out.float().flatten(0, 1), target.flatten()),
                    [f"blocks.{i}" for i in range(args.gpt_layers)], args.train)


MODELS = {"resnet50": resnet50, "gpt": gpt}


@contextlib.contextmanager
def left_out(model, path):
    """The module at `path` replaced by Identity for the block's duration."""
    parent_path, _, key = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    kept = getattr(parent, key)
    setattr(parent, key, torch.nn.Identity())
    try:
        yield
    finally:
        setattr(parent, key, kept)


def truths_in_mix(monitor, work, args):
    """Per removable module: J per step in the mix (the mean over rounds), its
    rounds, and their standard error; the full step's measurements."""
    def per_step():
        proof.run_for(work.step, 1.0)  # warm (a changed graph: allocator, kernels' caches)
        calls, energy, _, _ = proof.measured_window(monitor, "loo", work.step, args.loo_seconds, args.gpu)
        return energy / calls

    model, removable = work.model, work.removable
    fulls, without = [], {p: [] for p in removable}
    if args.loo_together:
        without[TOGETHER] = []
    for _ in range(args.loo_repeats):
        fulls.append(per_step())
        for path in removable:
            with left_out(model, path):
                without[path].append(per_step())
        if args.loo_together:
            with contextlib.ExitStack() as stack:
                for path in removable:
                    stack.enter_context(left_out(model, path))
                without[TOGETHER].append(per_step())
    fulls.append(per_step())
    out = proof.truths_from_rounds(fulls, without)
    print(f"truths: full step {', '.join(f'{f:.3f}' for f in fulls)} J; " +
          ", ".join(f"{p} {out[p]:.4f}" for p in removable) + " J/step", flush=True)
    return out


# -- one run ------------------------------------------------------------------------

def mixed_window(monitor, work, args, name):
    """--seconds of steps inside a session and one window: (steps, settled measurement, session)."""
    with joule.torch.attribute(work.model, monitor, depth=1, phases=work.train, optimizer=work.optimizer,
                               clock="gpu") as session:
        work.region = session.region
        proof.run_for(work.step, 2.0)  # warm, hooked
        torch.cuda.synchronize()
        monitor.begin_window(name)
        steps = proof.run_for(work.step, args.seconds)
        torch.cuda.synchronize()
        m = monitor.end_window(name)
    work.region = lambda _name: contextlib.nullcontext()
    return steps, monitor.settle(m, timeout_s=5.0), session


# How each run is attributed: joule's defaults (the model's bias carried), the
# statistical interval alone, and with the idle power measured before the run
# given as the baseline.
VARIANTS = ("default", "statistical", "idle_baseline", "each_own")


def estimates_by_path(a, train):
    """What each module's truth is judged against: its total (forward and backward) in training, else its
    forward region."""
    if train:
        return {t.name: t for t in a.totals}
    return {r.name[:-len(SUFFIX)]: r for r in a.regions if r.name.endswith(SUFFIX)}


def rows_of(attributions, truth, train):
    """Per module with a truth, per variant: the estimate, its interval, the error and whether it holds the truth."""
    rows = []
    by_variant = {v: estimates_by_path(attributions[v], train) for v in VARIANTS}
    for path, r in by_variant["default"].items():
        if path not in truth or r.calls == 0:
            continue
        parts = [by_variant[v][path] for v in VARIANTS]
        true = truth[path]
        row = {"region": path, "truth_share": true / statistics.fmean(truth["_full_step_j"]), "calls": r.calls,
               "truth_j": true,
               "truth_se_j": truth["_spread_j"][path], "gpu_ms_per_call": 1e3 * r.gpu_time_s / r.calls}
        for variant, g in zip(VARIANTS, parts):
            est, low, high = g.energy_per_call_j, g.energy_low_j / g.calls, g.energy_high_j / g.calls
            row[variant] = {"energy_per_call_j": est, "error": est / true - 1, "low_j": low, "high_j": high,
                            "half_width": (high - low) / 2 / abs(est), "inside": bool(low <= true <= high),
                            "power_w": g.power_w, "share": g.share}
        rows.append(row)
    return rows


def together_of(attributions, truth, train, removable):
    """With --loo-together: the modules that can be left out, as one. Their truth left out at once against the sum
    of their single truths (do leave-one-out truths add up?) and each variant's sum of their estimates."""
    if TOGETHER not in truth:
        return None
    together_j = truth[TOGETHER]
    out = {"modules": len(removable), "together_j": together_j, "together_se_j": truth["_spread_j"][TOGETHER],
           "sum_of_singles_j": sum(truth[p] for p in removable),
           "step_j": statistics.fmean(truth["_full_step_j"])}
    for variant, a in attributions.items():
        estimates = estimates_by_path(a, train)
        fitted_j = sum(estimates[p].energy_per_call_j for p in removable if p in estimates)
        out[variant] = {"fitted_j": fitted_j, "error": fitted_j / together_j - 1}
    return out


def one_run(monitor, model_name, k, response, idle_w, args):
    torch.manual_seed(k)
    work = MODELS[model_name](args)
    out_dir = os.path.join(args.out_dir, f"{model_name}-run{k}")
    os.makedirs(out_dir, exist_ok=True)
    with work.grad_mode():
        step_ms = proof.gpu_ms(work.step)
        print(f"{model_name} run {k}: step {step_ms:.2f} ms ({'training' if work.train else 'inference'}), "
              f"{len(work.removable)} modules to leave out", flush=True)
        steps, m, session = mixed_window(monitor, work, args, f"{model_name}-run{k}")
        options = {"sample_response": response, "bootstrap_rounds": args.bootstrap_rounds}
        attributions = {"default": session.result(m, **options)[args.gpu],
                        "statistical": session.result(m, model_bias=0.0, **options)[args.gpu],
                        "idle_baseline": session.result(m, baseline_w=idle_w, **options)[args.gpu],
                        "each_own": session.result(m, tie_identical=False, **options)[args.gpu]}
        proof.write_raw(monitor, session, m, types.SimpleNamespace(out_dir=out_dir, gpu=args.gpu))
        print(f"{model_name} run {k}: {steps} steps in {m.elapsed_s:.1f} s, {proof.gpu_energy(m, args.gpu):.0f} J",
              flush=True)
        truth = truths_in_mix(monitor, work, args)
    rows = rows_of(attributions, truth, work.train)
    together = together_of(attributions, truth, work.train, work.removable)
    result = {"gpu": torch.cuda.get_device_name(args.gpu), "torch": torch.__version__, "model": model_name,
              "run": k, "args": {key: v for key, v in vars(args).items() if key != "response"},
              "step_ms": step_ms, "steps": steps, "elapsed_s": m.elapsed_s, "energy_j": proof.gpu_energy(m, args.gpu),
              "session_notes": session.notes, "sample_response": response.to_dict(), "in_mix": truth, "rows": rows,
              "together": together, "idle_w": idle_w, "attributions": {v: a.to_dict() for v, a in attributions.items()}}
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(joule.attribution.format_table(attributions["default"], gpu_label=f"{model_name} run {k}"), flush=True)
    for r in rows:
        print(f"  {r['region']:10s} {100 * r['truth_share']:5.1f}%  truth {r['truth_j']:.4f} J  " + "  ".join(
            f"{v} {100 * r[v]['error']:+6.1f}% +-{100 * r[v]['half_width']:5.1f}% "
            f"{'holds' if r[v]['inside'] else 'MISSES'}" for v in VARIANTS), flush=True)
    if together:
        print(f"  the {together['modules']} modules left out together: {together['together_j']:.4f} J/step "
              f"(+-{together['together_se_j']:.4f}), their single truths sum to {together['sum_of_singles_j']:.4f} "
              f"({100 * (together['sum_of_singles_j'] / together['together_j'] - 1):+.1f}%); fitted: " + ", ".join(
                  f"{v} {100 * together[v]['error']:+.1f}%" for v in VARIANTS), flush=True)
    return rows, together


# -- all runs -----------------------------------------------------------------------

def together_lines(togethers):
    """Per run made with --loo-together: the modules' truth left out together, their single truths' sum and each
    variant's fitted sum against it."""
    if not togethers:
        return []
    lines = ["", "| run | modules | together, J/step (share of the step) | sum of single truths | " +
             " | ".join(f"fitted, {v}" for v in VARIANTS) + " |", "|---" * (4 + len(VARIANTS)) + "|"]
    for run, t in sorted(togethers.items()):
        fitted = " | ".join(f"{100 * t[v]['error']:+.1f}%" for v in VARIANTS)
        lines.append(f"| {run} | {t['modules']} | {t['together_j']:.3f} +- {t['together_se_j']:.3f} "
                     f"({100 * t['together_j'] / t['step_j']:.1f}%) | "
                     f"{100 * (t['sum_of_singles_j'] / t['together_j'] - 1):+.1f}% | {fitted} |")
    return lines


def summary(runs, args, togethers=None):
    """Per model and over all, per variant: of the regions whose truth is >= --min-share of the step's energy, how many
    intervals hold the truth, their median half-width, how many are within 5% and the median and worst error; and
    the truths' median standard error over their rounds (NaN from one round), what an error below it cannot tell."""
    lines = ["| model | variant | regions | intervals that hold | median half-width | within 5% | median error | "
             "worst error | truths' median standard error |", "|---|---|---|---|---|---|---|---|---|"]
    report = {}
    groups = {m: [r for (name, _), rows in runs.items() if name == m for r in rows] for m in args.models}
    groups["all"] = [r for rows in runs.values() for r in rows]
    for name, rows in groups.items():
        for v in VARIANTS:
            large_rows = [r for r in rows if r["truth_share"] >= args.min_share and v in r]
            large = [r[v] for r in large_rows]
            if not large:
                continue
            s = {"regions": len(large), "hold": sum(r["inside"] for r in large),
                 "truth_median_se": statistics.median(r.get("truth_se_j", math.nan) / r["truth_j"] for r in large_rows),
                 "median_half_width": statistics.median(r["half_width"] for r in large),
                 "within_5pct": sum(abs(r["error"]) <= 0.05 for r in large),
                 "median_error": statistics.median(abs(r["error"]) for r in large),
                 "worst_error": max(abs(r["error"]) for r in large)}
            report.setdefault(name, {})[v] = s
            lines.append(f"| {name} | {v} | {s['regions']} | {s['hold']} ({100 * s['hold'] / s['regions']:.0f}%) | "
                         f"{100 * s['median_half_width']:.1f}% | {s['within_5pct']} | {100 * s['median_error']:.1f}% | "
                         f"{100 * s['worst_error']:.1f}% | {100 * s['truth_median_se']:.1f}% |")
    lines += together_lines(togethers or {})
    with open(os.path.join(args.out_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out_dir, "summary.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("\n".join(lines), flush=True)


def sample_response(monitor, args):
    if args.response:
        with open(args.response) as f:
            d = json.load(f)
        d = d.get("sample_response", d)
        return joule.SampleResponse(d["response_ms"], d["first_lag_ms"], d.get("rounds", []),
                                    d.get("rounds_first_lag_ms", 0))
    response = joule.torch.measure_sample_response(monitor, seconds=args.response_seconds, gpu=args.gpu, keep=False)
    print(f"sample response: {response!r}", flush=True)
    with open(os.path.join(args.out_dir, "response.json"), "w") as f:
        json.dump(response.to_dict(), f)
    return response


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="attribution-truths")
    p.add_argument("--models", type=lambda s: s.split(","), default=["resnet50", "gpt"])
    p.add_argument("--train", action="store_true",
                   help="training steps (forward, backward, AdamW), each module judged by its total")
    p.add_argument("--runs", type=int, default=3, help="runs per model (seeds 1..K)")
    p.add_argument("--first-run", type=int, default=1, help="the first run's seed")
    p.add_argument("--seconds", type=float, default=40.0, help="the attributed window")
    p.add_argument("--loo-seconds", type=float, default=3.0, help="each leave-one-out window")
    p.add_argument("--loo-repeats", type=int, default=2)
    p.add_argument("--loo-together", action="store_true",
                   help="also leave every such module out at once in each round: do the single truths add up?")
    p.add_argument("--response", default=None, help="a sample response's JSON (else measured)")
    p.add_argument("--response-seconds", type=float, default=30.0)
    p.add_argument("--idle-seconds", type=float, default=3.0, help="the idle power, measured once first")
    p.add_argument("--bootstrap-rounds", type=int, default=200)
    p.add_argument("--min-share", type=float, default=0.05)
    p.add_argument("--resnet-batch", type=int, default=256)
    p.add_argument("--gpt-batch", type=int, default=16)
    p.add_argument("--gpt-tokens", type=int, default=1024)
    p.add_argument("--gpt-width", type=int, default=1024)
    p.add_argument("--gpt-layers", type=int, default=8)
    p.add_argument("--gpt-vocab", type=int, default=32768)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--summarise", nargs="+", metavar="RUN_DIR", help="summarise stored runs instead (no GPU)")
    args = p.parse_args()
    unknown = set(args.models) - set(MODELS)
    if unknown:
        p.error(f"--models: unknown {sorted(unknown)} (known: {', '.join(MODELS)})")
    return args


def summarise_stored(args):
    """--summarise: the summary of stored runs (their result.json) into --out-dir, no GPU."""
    runs, togethers = {}, {}
    for path in args.summarise:
        with open(os.path.join(path, "result.json")) as f:
            r = json.load(f)
        runs[(r["model"], path)] = r["rows"]
        if r.get("together"):
            togethers[path] = r["together"]
    args.models = sorted({m for m, _ in runs})
    summary(runs, args, togethers)


def main():
    args = parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if args.summarise:
        return summarise_stored(args)
    torch.cuda.set_device(args.gpu)
    torch.backends.cudnn.benchmark = False  # the same kernels in every variant of the step
    monitor = joule.Monitor(interval_ms=100)
    response = sample_response(monitor, args)
    idle_w = proof.idle_power(monitor, args.idle_seconds, args.gpu)
    print(f"idle: {idle_w:.1f} W", flush=True)
    runs, togethers = {}, {}
    for model_name in args.models:
        for k in range(args.first_run, args.first_run + args.runs):
            t = time.perf_counter()
            runs[(model_name, k)], together = one_run(monitor, model_name, k, response, idle_w, args)
            if together:
                togethers[f"{model_name}-run{k}"] = together
            torch.cuda.empty_cache()
            print(f"{model_name} run {k} took {time.perf_counter() - t:.0f} s", flush=True)
    summary(runs, args, togethers)


if __name__ == "__main__":
    main()
