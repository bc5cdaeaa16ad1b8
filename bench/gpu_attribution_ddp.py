#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: energy per region of a DistributedDataParallel step on real
GPUs over NCCL, the gradient all-reduce included as the concurrent region
"allreduce" (joule.torch.attribute on the DDP model). Changes no GPU setting.

    torchrun --standalone --nproc-per-node 2 bench/gpu_attribution_ddp.py --out-dir ddp \\
        --response bench/results/2026-11-26-h100-attribution-proof/proof/result.json

Each rank measures its own GPU (joule.Monitor(gpus=[local rank])). A stack
of Transformer encoder blocks (bf16 autocast, synthetic tokens), DDP with its
default buckets; the overhead (DDP's built-in all-reduce against sessions
with the modules only, then with joule's comm hook registered: plain steps
against full sessions; blocks interleaved, medians), then
one window of --seconds attributed with the samples' response stored by a
proof run on the same GPU model (--response: a result.json with
"sample_response", or measured here for 40 s when not given). Writes, per
rank: the table, the JSON and the HTML page, and a summary of the checks:
allreduce calls = DDP's buckets x steps, the parts sum to the window's
energy, the all-reduce's added power and share, the overhead.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import joule
import joule.attribution
import joule.torch


class Blocks(torch.nn.Module):
    """Transformer encoder blocks and a head; depth 1 is each block (a
    ModuleList is no depth level) and the head."""

    def __init__(self, args):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(args.width, args.heads, 4 * args.width, batch_first=True,
                                             norm_first=True, dropout=0.0) for _ in range(args.layers))
        self.head = torch.nn.Linear(args.width, args.width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def add_blocks_arguments(parser):
    """The Transformer blocks' and the batch's sizes (Blocks, build)."""
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)


def build(args, gpu):
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(Blocks(args).cuda(), device_ids=[gpu])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.tokens, args.width, device="cuda")
    return ddp, opt, x


def step(ddp, opt, x, region):
    with region("data"):
        batch = x * 1.0
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = ddp(batch).float().pow(2).mean()
    loss.backward()
    opt.step()


class NoRegion:
    def __call__(self, name):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def timed(ddp, opt, x, region, n):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(ddp, opt, x, region)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def agreed_steps(ddp, opt, x, seconds):
    """Steps for `seconds`, the same on every rank (DDP needs the same count)."""
    per = timed(ddp, opt, x, NoRegion(), 10)
    rate = torch.tensor([1.0 / statistics.median(per)], device="cuda")
    dist.all_reduce(rate, op=dist.ReduceOp.MIN)
    return max(1, int(rate.item() * seconds))


def load_response(path, monitor):
    if not path:
        return joule.torch.measure_sample_response(monitor, seconds=40.0, keep=False)
    r = json.load(open(path))["sample_response"]
    return joule.SampleResponse(r["response_ms"], r["first_lag_ms"], r.get("rounds", []),
                                r.get("rounds_first_lag_ms", 0))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--response", help="a proof run's result.json (its sample_response); none: measure 40 s")
    add_blocks_arguments(p)
    p.add_argument("--depth", type=int, default=1, help="the modules' depth (1: each block and the head)")
    p.add_argument("--overhead-blocks", type=int, default=6)
    p.add_argument("--block", type=int, default=15)
    args = p.parse_args()

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's indices = NVML's
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    gpu = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
    torch.cuda.set_device(gpu)
    monitor = joule.Monitor(gpus=[gpu], interval_ms=100)
    response = load_response(args.response, monitor)
    ddp, opt, x = build(args, gpu)
    timed(ddp, opt, x, NoRegion(), 5)  # warm-up: kernels chosen, buckets rebuilt

    # Overhead, blocks interleaved (medians). DDP takes one comm hook for good,
    # so first DDP's built-in all-reduce against sessions without the
    # all-reduce's recording, then, the hook registered, plain steps (the hook
    # only communicating) against full sessions.
    def session_of(**options):
        return joule.torch.attribute(ddp, monitor, depth=args.depth, optimizer=opt, **options)

    builtin, modules, hooked, recorded = [], [], [], []
    host_edges, forward_only = [], []  # where the modules' cost goes: CUDA events, backward hooks
    for _ in range(args.overhead_blocks):
        builtin += timed(ddp, opt, x, NoRegion(), args.block)
        with session_of(allreduce=False) as session:
            modules += timed(ddp, opt, x, session.region, args.block)
        with session_of(allreduce=False, clock="host") as session:
            host_edges += timed(ddp, opt, x, session.region, args.block)
        with session_of(allreduce=False, phases=False) as session:
            forward_only += timed(ddp, opt, x, session.region, args.block)
    for _ in range(args.overhead_blocks):
        with session_of(allreduce=True) as session:
            recorded += timed(ddp, opt, x, session.region, args.block)
        hooked += timed(ddp, opt, x, NoRegion(), args.block)
    base = statistics.median(builtin)
    overhead = {name: {"step_ms": 1e3 * statistics.median(t), "percent": 100 * (statistics.median(t) / base - 1)}
                for name, t in (("builtin", builtin), ("modules_only", modules), ("modules_host_edges", host_edges),
                                ("modules_forward_only", forward_only), ("hook_registered_plain", hooked),
                                ("recorded", recorded))}

    steps = agreed_steps(ddp, opt, x, args.seconds)
    dist.barrier()
    with session_of(allreduce=True) as session:
        with monitor.window("ddp") as w:
            times = timed(ddp, opt, x, session.region, steps)
    settled = w.settled(timeout_s=10.0)
    a = session.result(settled, sample_response=response)[0]

    regions = {r.name: r for r in a.regions}
    allreduce = regions.get("allreduce")
    parts_j = sum(r.energy_j for r in a.regions) + a.idle_energy_j
    summary = {
        "rank": rank, "world": world, "gpu": torch.cuda.get_device_name(gpu), "torch": torch.__version__,
        "steps": steps, "step_ms_median": 1e3 * statistics.median(times),
        "overhead": overhead,
        "window_energy_j": a.window_energy_j, "parts_j": parts_j,
        "allreduce": None if allreduce is None else {
            "calls": allreduce.calls, "calls_per_step": allreduce.calls / steps, "gpu_time_s": allreduce.gpu_time_s,
            "added_power_w": allreduce.power_above_baseline_w, "energy_j": allreduce.energy_j,
            "interval_j": [allreduce.energy_low_j, allreduce.energy_high_j], "share": allreduce.share,
            "resolved": allreduce.resolved},
        "notes": list(a.notes),
    }
    os.makedirs(args.out_dir, exist_ok=True)
    table = joule.attribution.format_table(a, gpu_label=f"rank {rank}, GPU {gpu}")
    with open(os.path.join(args.out_dir, f"rank{rank}.txt"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"summary": summary, "attribution": json.loads(joule.attribution.to_json([a]))}, f, indent=1)
    joule.attribution.to_html([a], os.path.join(args.out_dir, f"rank{rank}.html"),
                              title=f"Energy per region, DDP over NCCL, rank {rank}", gpu_labels=[f"GPU {gpu}"])
    for r in range(world):
        dist.barrier()
        if r == rank:
            print(table, flush=True)
            print(json.dumps({k: v for k, v in summary.items() if k != "notes"}, indent=1), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
