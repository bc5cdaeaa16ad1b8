#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per layer of real models on a real GPU, and what recording costs
(docs/attribution.md, issue 32: the "real model" proof and the <= 3% overhead
target). Read-only: changes no GPU setting.

Two models, trained on synthetic data with bf16 autocast:
  resnet50  torchvision's ResNet-50, channels_last, in-place ReLUs left on,
            224x224 images (batch 128), SGD with momentum;
  gpt       the small GPT-style Transformer of bench/gpt_model.py (token + positional
            embedding, N blocks of [LayerNorm, causal self-attention through
            scaled_dot_product_attention, LayerNorm, 4x GELU MLP] in a
            ModuleList `blocks`, final LayerNorm, LM head; 12 layers, width
            1024, 16 heads, 1024 tokens, vocabulary 32000, batch 8), AdamW,
            next-token cross entropy.
Each step: region "data" (a pinned host batch copied to the GPU and, for the
images, converted and normalised there), forward, region "loss" (the loss's
forward), backward, the optimizer's step.

1. Overhead (issue 32 (b)): A/B blocks interleaved in one run, so drift hits
   both alike: blocks of plain steps and blocks of the same steps inside
   joule.torch.attribute(model, monitor, depth=D, phases=True, optimizer=opt,
   clock="gpu"), at depths 1 and 2 of both models, one monitor open
   throughout; where the CUDA runtime is reachable from C++ (the default
   events), blocks recorded with torch's events (the Python path) too.
   Median step time (each step timed to the end of its GPU work) of each
   kind, the ratio, PASS/MISS against 3%; and the same blocks' steps queued
   with no sync between them (a loop that does not wait for each step).
2. Attribution (issue 32 (a)): per model (ResNet-50 at depth 1 and at
   --resnet-depth, the GPT at depth 1: embeddings, blocks.0..N-1, ln_f, head)
   one window: --idle-s of idle GPU (so the baseline is observed), then
   --seconds of training steps inside the session; settled; attributed
   (bootstrap intervals). Per run: the text table, <run>.json, <run>.html,
   and the reordering in numbers: regions ranked by their share of the
   regions' GPU time and by their share of the regions' energy, Spearman's
   rank correlation, the regions that move most, each region's power while it
   runs against the step's mean power and its energy share / time share.
   summary.md collects every table; overhead.json the overhead rows.
Exits 0 whether or not the targets are met.

  /tmp/joule-venv/bin/python bench/gpu_attribution_models.py --out-dir DIR
  /tmp/joule-venv/bin/python bench/gpu_attribution_models.py --out-dir DIR --quick   # smoke run, ~1 min
(joule installed there first: bench/gpu_install.sh dist /tmp/joule-venv; locally PYTHONPATH=build/python)
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import time
import traceback

import torch
import torch.nn.functional as F

import joule
import joule.attribution
import joule.torch
from gpt_model import SmallGPT  # beside this file

TARGET_PERCENT = 3.0


# -- workloads --------------------------------------------------------------


class Workload:
    """A model, its optimizer, a loss, and synthetic batches from pinned host
    buffers (cycled; only read, so reusing them while a copy runs is safe)."""

    def __init__(self, name, model, opt, host_batches, to_device, loss):
        self.name, self.model, self.opt = name, model, opt
        self.host_batches, self.to_device, self.loss_fn = host_batches, to_device, loss
        self.index = 0

    def batch(self):
        self.index = (self.index + 1) % len(self.host_batches)
        return self.to_device(*self.host_batches[self.index])


def _version_of(module):
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def resnet_workload(batch, buffers=4):
    import torchvision  # only for this model: a GPU machine may lack it

    model = torchvision.models.resnet50(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    host = [(torch.randint(0, 256, (batch, 224, 224, 3), dtype=torch.uint8).pin_memory(),
             torch.randint(0, 1000, (batch,)).pin_memory()) for _ in range(buffers)]
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1)

    def to_device(images, labels):
        x = images.cuda(non_blocking=True).permute(0, 3, 1, 2).float().div_(255)  # NHWC memory: channels_last
        x = ((x - mean) / std).contiguous(memory_format=torch.channels_last)
        return x, labels.cuda(non_blocking=True)

    return Workload("resnet50", model, opt, host, to_device, F.cross_entropy)


def gpt_workload(batch, layers, width, heads, tokens, vocab, buffers=4):
    model = SmallGPT(vocab, tokens, width, heads, layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    host = [(torch.randint(0, vocab, (batch, tokens + 1)).pin_memory(),) for _ in range(buffers)]

    def to_device(ids):
        ids = ids.cuda(non_blocking=True)
        return ids[:, :-1], ids[:, 1:]

    def loss(logits, target):
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.reshape(-1))

    return Workload("gpt", model, opt, host, to_device, loss)


# -- steps ---------------------------------------------------------------


def no_region(_name):
    return contextlib.nullcontext()


def step(work, region):
    """One training step; region(name) marks the data and the loss's forward."""
    with region("data"):
        x, y = work.batch()
    work.opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = work.model(x)
        with region("loss"):
            loss = work.loss_fn(out, y)
    loss.backward()
    work.opt.step()


def timed_steps(work, region, n=None, seconds=None):
    """Seconds per step (each timed to the end of its GPU work), for n steps
    or until `seconds` have passed."""
    times, start = [], time.perf_counter()
    while (n is not None and len(times) < n) or (seconds is not None and time.perf_counter() - start < seconds):
        t0 = time.perf_counter()
        step(work, region)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def queued_step_s(work, region, n):
    """Seconds per step over n steps run with no sync between them (the host
    may queue ahead, as in a loop that does not wait for each step)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        step(work, region)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n


def session_for(work, monitor, depth, events=None):
    """joule.torch.attribute's session; events: the GPU clock's (None: its
    default, the CUDA runtime from C++ where reachable)."""
    return joule.torch.regions.RegionAttribution(work.model, monitor, depth=depth, phases=True, optimizer=work.opt,
                                                 clock="gpu", events=events)


# -- overhead (b) --------------------------------------------------------


def overhead(work, monitor, depth, block, repeats):
    """Blocks of plain steps, of steps recorded with the GPU clock's default
    events (the CUDA runtime from C++) and, where that is reachable, of steps
    recorded with torch's events (through Python, the previous path),
    interleaved. The row's overhead is the default's: steps timed alone (a
    sync after each) and, beside it, steps queued (queued_step_s; section 16p)."""
    runtime = joule.torch.clocks.cuda_runtime_events()
    kinds = {"default": None}
    if runtime is not None:
        kinds["torch_events"] = joule.torch.CudaEvents()
    plain, recorded, regions = [], {k: [] for k in kinds}, 0
    queued_plain, queued = [], []
    for _ in range(repeats):
        plain += timed_steps(work, no_region, n=block)
        queued_plain.append(queued_step_s(work, no_region, block))
        for kind, events in kinds.items():
            with session_for(work, monitor, depth, events=events) as session:
                recorded[kind] += timed_steps(work, session.region, n=block)
                if kind == "default":
                    queued.append(queued_step_s(work, session.region, block))
            regions = len(set(session.recorder.names))  # GPU-clock edges reach the recorder when the session ends
    qa, qb = statistics.median(queued_plain), statistics.median(queued)
    a = statistics.median(plain)
    b = {kind: statistics.median(times) for kind, times in recorded.items()}
    percent = {kind: 100 * (v / a - 1) for kind, v in b.items()}
    row = {"model": work.name, "depth": depth, "regions": regions, "steps_each": len(plain),
           "events": runtime.runtime_path if runtime else "torch.cuda.Event (no CUDA runtime reachable from C++)",
           "plain_step_ms": 1e3 * a, "recorded_step_ms": 1e3 * b["default"],
           "overhead_percent": percent["default"], "target_percent": TARGET_PERCENT,
           "pass": percent["default"] <= TARGET_PERCENT, "queued_plain_step_ms": 1e3 * qa,
           "queued_recorded_step_ms": 1e3 * qb, "queued_overhead_percent": 100 * (qb / qa - 1)}
    if "torch_events" in b:
        row["torch_events_step_ms"] = 1e3 * b["torch_events"]
        row["torch_events_overhead_percent"] = percent["torch_events"]
    print(f"overhead {work.name:8s} depth {depth}: {regions:4d} regions, step {1e3 * a:7.2f} ms plain, "
          f"{1e3 * b['default']:7.2f} ms recorded: {percent['default']:+.2f}% "
          f"{'PASS' if row['pass'] else 'MISS'} (<= {TARGET_PERCENT}%); queued {row['queued_overhead_percent']:+.2f}%"
          + (f"; torch events {1e3 * b['torch_events']:7.2f} ms: {percent['torch_events']:+.2f}%"
             if "torch_events" in b else ""), flush=True)
    return row


# -- attribution (a) -----------------------------------------------------


def attribute_run(work, monitor, depth, args):
    """One window: idle, then training steps in the session. Returns
    (attributions, session, step times, loop seconds, measurement)."""
    torch.cuda.synchronize()
    with monitor.window(f"{work.name}-depth{depth}") as w:
        time.sleep(args.idle_s)  # the GPU idle: observations of the baseline
        with session_for(work, monitor, depth) as session:
            start = time.perf_counter()
            times = timed_steps(work, session.region, seconds=args.seconds)
            loop_s = time.perf_counter() - start
    settled = w.settled(timeout_s=5.0)
    attributions = session.result(settled, bootstrap_rounds=args.bootstrap, confidence=0.9,
                                  sample_response=args.response)
    return attributions, session, times, loop_s, settled


def finite(x):
    return x is not None and not (math.isnan(x) or math.isinf(x))


def ranks(values):
    """Rank 1 = largest; ties get their mean rank."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(ra)
    if n < 2:
        return math.nan
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var > 0 else math.nan


def reordering(a, loop_s, steps):
    """Time ranking vs energy ranking over the regions (shares of the regions'
    total time and energy; the idle time is left out of both)."""
    regions = [r for r in a.regions if r.gpu_time_s > 0 and finite(r.energy_j)]
    total_t = sum(r.gpu_time_s for r in regions)
    total_e = sum(r.energy_j for r in regions)
    regions_power = total_e / total_t if total_t > 0 else math.nan
    in_loop_idle_s = max(0.0, loop_s - total_t)
    step_power = ((total_e + a.baseline_w * in_loop_idle_s) / loop_s
                  if a.baseline_separated and loop_s > 0 else regions_power)
    t_share = [r.gpu_time_s / total_t for r in regions]
    e_share = [r.energy_j / total_e for r in regions]
    rt, re_ = ranks(t_share), ranks(e_share)
    rows = [{"name": r.name, "resolved": r.resolved, "calls": r.calls, "gpu_time_s": r.gpu_time_s,
             "time_share": ts, "energy_j": r.energy_j, "energy_share": es, "time_rank": a_, "energy_rank": b_,
             "rank_move": a_ - b_, "power_w": r.power_w, "power_vs_step": r.power_w / step_power
             if finite(r.power_w) and finite(step_power) and step_power > 0 else math.nan,
             "energy_over_time_share": es / ts if ts > 0 else math.nan}
            for r, ts, es, a_, b_ in zip(regions, t_share, e_share, rt, re_)]
    resolved = [row for row in rows if row["resolved"]]
    rho = spearman([row["time_share"] for row in resolved], [row["energy_share"] for row in resolved])
    movers = sorted(rows, key=lambda row: -abs(row["rank_move"]))[:5]
    return {"spearman": rho, "spearman_regions": len(resolved), "regions_power_w": regions_power,
            "step_power_w": step_power, "in_loop_idle_s": in_loop_idle_s, "loop_s": loop_s, "steps": steps,
            "rows": sorted(rows, key=lambda row: -row["time_share"]),
            "movers": [{"name": m["name"], "time_rank": m["time_rank"], "energy_rank": m["energy_rank"],
                        "rank_move": m["rank_move"]} for m in movers if m["rank_move"] != 0]}


def num(x, fmt):
    return format(x, fmt) if finite(x) else "-"


def reordering_markdown(ro):
    lines = [f"Spearman rank correlation, time share vs energy share: {num(ro['spearman'], '.3f')} "
             f"({ro['spearman_regions']} resolved regions). Step mean power {num(ro['step_power_w'], '.1f')} W "
             f"(regions' mean {num(ro['regions_power_w'], '.1f')} W; {ro['in_loop_idle_s']:.2f} s of "
             f"{ro['loop_s']:.1f} s in the loop outside every region, counted at the baseline).", "",
             "| region | time share | time rank | energy share | energy rank | rank move (time - energy) | power (W) | "
             "power / step mean | energy share / time share |", "|---|---|---|---|---|---|---|---|---|"]
    for r in ro["rows"]:
        lines.append(f"| {r['name']}{'' if r['resolved'] else ' *'} | {100 * r['time_share']:.2f}% | "
                     f"{r['time_rank']:g} | {100 * r['energy_share']:.2f}% | {r['energy_rank']:g} | "
                     f"{r['rank_move']:+g} | {num(r['power_w'], '.1f')} | {num(r['power_vs_step'], '.3f')} | "
                     f"{num(r['energy_over_time_share'], '.3f')} |")
    if ro["movers"]:
        lines += ["", "Largest rank moves (time rank -> energy rank): " + "; ".join(
            f"{m['name']} {m['time_rank']:g} -> {m['energy_rank']:g}" for m in ro["movers"])]
    lines.append("(* unresolved: its energy is its time at the baseline power; left out of the correlation)")
    return "\n".join(lines) + "\n"


def write_run(out_dir, run, work, depth, result, env):
    attributions, session, times, loop_s, settled = result
    a = attributions[0]
    ro = reordering(a, loop_s, len(times))
    table = joule.attribution.format_table(a, gpu_label="GPU 0")
    doc = {"run": run, "model": work.name, "depth": depth, **env, "steps": len(times),
           "step_time_median_s": statistics.median(times), "loop_s": loop_s,
           "window_elapsed_s": settled.elapsed_s, "window_gpu_energy_j": list(settled.gpu_energy_j),
           "session_notes": list(session.notes), "clock_uncertainty_s": session.clock_uncertainty_s,
           "attributions": json.loads(joule.attribution.to_json(attributions)), "reordering": ro}
    with open(os.path.join(out_dir, f"{run}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    labels = [f"GPU {i}" for i in range(len(attributions))]
    joule.attribution.to_html(attributions, os.path.join(out_dir, f"{run}.html"),
                              title=f"Energy per region: {work.name}, depth {depth}", gpu_labels=labels)
    md = (f"## {run}\n\n{len(times)} steps, median step {1e3 * statistics.median(times):.2f} ms, "
          f"clock uncertainty {1e6 * session.clock_uncertainty_s:.1f} us\n\n```\n{table}```\n\n"
          + "".join(f"- session note: {n}\n" for n in session.notes) + "\n" + reordering_markdown(ro))
    print(md, flush=True)
    return md


# -- main ----------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="./attribution-models")
    p.add_argument("--models", default="resnet50,gpt", help="comma-separated: resnet50, gpt")
    p.add_argument("--block", type=int, default=15, help="overhead: steps per block")
    p.add_argument("--repeats", type=int, default=8, help="overhead: blocks of each kind")
    p.add_argument("--overhead-depths", default="1,2")
    p.add_argument("--seconds", type=float, default=40.0, help="attribution: seconds of training per run")
    p.add_argument("--idle-s", type=float, default=3.0, help="attribution: idle seconds in the window first")
    p.add_argument("--response-seconds", type=float, default=40.0,
                   help="measure the samples' response first (joule.torch.measure_sample_response); 0: the boxcar")
    p.add_argument("--resnet-depth", type=int, default=2, help="attribution: ResNet's second depth (0: none)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap rounds")
    p.add_argument("--resnet-batch", type=int, default=128)
    p.add_argument("--gpt-batch", type=int, default=8)
    p.add_argument("--gpt-layers", type=int, default=12)
    p.add_argument("--gpt-width", type=int, default=1024)
    p.add_argument("--gpt-heads", type=int, default=16)
    p.add_argument("--gpt-tokens", type=int, default=1024)
    p.add_argument("--gpt-vocab", type=int, default=32000)
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--skip-attribution", action="store_true")
    p.add_argument("--quick", action="store_true", help="smoke run: small models, few steps")
    args = p.parse_args()
    if args.quick:
        args.block, args.repeats, args.seconds, args.idle_s, args.bootstrap = 3, 2, 5.0, 1.0, 20
        args.resnet_batch, args.gpt_batch, args.gpt_layers, args.gpt_width = 32, 4, 4, 512
        args.gpt_heads, args.gpt_tokens = 8, 256
    return args


def make_workload(name, args):
    if name == "resnet50":
        return resnet_workload(args.resnet_batch), [1] + ([args.resnet_depth] if args.resnet_depth > 1 else [])
    if name == "gpt":
        return gpt_workload(args.gpt_batch, args.gpt_layers, args.gpt_width, args.gpt_heads,
                            args.gpt_tokens, args.gpt_vocab), [1]
    raise SystemExit(f"unknown model {name}")


def run_model(name, args, monitor, env, overhead_rows, sections):
    work, attribution_depths = make_workload(name, args)
    timed_steps(work, no_region, n=10)  # warm-up: cudnn's choices, the allocator
    if not args.skip_overhead:
        for depth in (int(d) for d in args.overhead_depths.split(",") if d):
            try:
                overhead_rows.append(overhead(work, monitor, depth, args.block, args.repeats))
            except Exception:
                sections.append(f"## overhead {name} depth {depth}: failed\n\n```\n{traceback.format_exc()}```\n")
                print(sections[-1], flush=True)
    if args.skip_attribution:
        return
    for depth in attribution_depths:
        run = f"{name}-depth{depth}"
        try:
            sections.append(write_run(args.out_dir, run, work, depth, attribute_run(work, monitor, depth, args), env))
        except Exception:
            sections.append(f"## {run}: failed\n\n```\n{traceback.format_exc()}```\n")
            print(sections[-1], flush=True)


def overhead_markdown(rows):
    lines = ["## Overhead (target <= 3% of step time)", "",
             "| model | depth | regions | plain step | recorded step | overhead | target | queued steps' overhead |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['depth']} | {r['regions']} | {r['plain_step_ms']:.2f} ms | "
              f"{r['recorded_step_ms']:.2f} ms | {r['overhead_percent']:+.2f}% | {'PASS' if r['pass'] else 'MISS'} | "
              f"{r['queued_overhead_percent']:+.2f}% |" for r in rows]
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "torchvision": _version_of("torchvision"),
           "quick": args.quick, "args": dict(vars(args))}
    monitor = joule.Monitor(interval_ms=100)
    args.response = None
    if args.response_seconds > 0 and not args.skip_attribution:
        args.response = joule.torch.measure_sample_response(monitor, seconds=args.response_seconds, keep=False)
        print(f"sample response: {args.response!r}", flush=True)
        env["sample_response"] = args.response.to_dict()
    overhead_rows, sections = [], []
    start = time.perf_counter()
    for name in (m for m in args.models.split(",") if m):
        run_model(name, args, monitor, env, overhead_rows, sections)
        torch.cuda.empty_cache()
    with open(os.path.join(args.out_dir, "overhead.json"), "w") as f:
        json.dump({**env, "rows": overhead_rows}, f, indent=1)
    summary = (f"# Energy per region of real models\n\n{env['gpu']}, torch {env['torch']}, "
               f"{time.perf_counter() - start:.0f} s in all{' (--quick)' if args.quick else ''}\n\n"
               + (overhead_markdown(overhead_rows) + "\n" if overhead_rows else "") + "\n".join(sections))
    with open(os.path.join(args.out_dir, "summary.md"), "w") as f:
        f.write(summary)
    if overhead_rows:
        print(overhead_markdown(overhead_rows))
    print(f"wrote {args.out_dir}/summary.md", flush=True)


if __name__ == "__main__":
    main()
