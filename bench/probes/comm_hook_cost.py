#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: what a DDP communication hook costs a step (issue 53, item 3:
the all-reduce recorded for <= 1%). Changes no GPU setting.

    torchrun --standalone --nproc-per-node 2 bench/probes/comm_hook_cost.py [--blocks 8] [--block 15] [--rounds N]
        [--kinds "built-in;built-in (twin);..."]

The Transformer blocks of gpu_attribution_ddp.py, one DDP model per kind
(DDP keeps a comm hook for good), blocks of steps interleaved (each round of
blocks starting with the next kind), medians:
  built-in            DDP's own all-reduce (no hook)
  built-in (twin)     a second such model: how far two models of one kind differ here
  built-in hook       _register_builtin_comm_hook(ALLREDUCE): DDP's C++ hook
  default_hooks       default_hooks.allreduce_hook: torch's Python hook
  joule C++ (idle)    joule.torch.register_comm_hook (its C++ hook, built at first use) outside a session
  joule C++ + edges   the same while a session records (edges on a joule.GpuEdgeClock)
  joule C++ + no-op edges  the same recording into a Python object whose methods do nothing
                      (the GIL and a Python call an edge, and the future's then())
  joule Py (idle)     joule.torch.register_comm_hook(native=False): its Python hook, outside a session
  joule Py + edges    the same while a session records
  direct              a Python hook calling the process group's allreduce itself
                      (AVG where NCCL, else divide and SUM) and a then() that unwraps
  direct + edges      the same recording both edges on a joule.GpuEdgeClock
  session             each block of steps in a joule.torch.attribute session at --depth
                      with allreduce=False: the modules' edges alone (no comm hook)
  session + allreduce the same with the all-reduce recorded (joule's C++ comm hook): a
                      whole session, to set against "session" and "joule C++ + edges"
                      (section 16i's ~4.5% came from phases run one after the other)
"""
import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import joule  # noqa: E402
import joule.torch  # noqa: E402
from gpu_attribution_ddp import Blocks, NoRegion, add_blocks_arguments, timed  # noqa: E402  (bench/)


def direct_hook(edges):
    avg = dist.get_backend() == "nccl"

    def hook(pg, bucket):
        tensor = bucket.buffer()
        if edges is not None:
            edges.begin_concurrent("allreduce")
        if avg:
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.AVG
            fut = pg.allreduce([tensor], opts).get_future()
        else:
            tensor.div_(pg.size())
            fut = pg.allreduce([tensor]).get_future()

        def unwrap(f):
            if edges is not None:
                edges.end_concurrent("allreduce")
            return f.value()[0]

        return fut.then(unwrap)

    return hook


class NoopEdges:
    def begin_concurrent(self, name):
        pass

    def end_concurrent(self, name):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--block", type=int, default=15)
    p.add_argument("--rounds", type=int, default=1, help="the whole comparison, this many times")
    p.add_argument("--kinds", help="the kinds to compare, separated by ';' (default: all; built-in always)")
    p.add_argument("--depth", type=int, default=1, help="the sessions' module depth")
    add_blocks_arguments(p)
    args = p.parse_args()
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    dist.init_process_group("nccl")
    gpu = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
    torch.cuda.set_device(gpu)
    monitor = joule.Monitor(gpus=[gpu], interval_ms=100)
    recorder = joule.RegionRecorder(monitor)
    clock = joule.torch.GpuClock(recorder)
    x = torch.randn(args.batch, args.tokens, args.width, device="cuda")

    def model():
        torch.manual_seed(0)
        ddp = torch.nn.parallel.DistributedDataParallel(Blocks(args).cuda(), device_ids=[gpu])
        return ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-4)

    kinds = {}
    sessions = {}  # kind -> joule.torch.attribute's options: each block of steps in a session
    kinds["built-in"] = model()
    kinds["built-in (twin)"] = model()
    kinds["built-in hook"] = model()
    kinds["built-in hook"][0]._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    kinds["default_hooks"] = model()
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    kinds["default_hooks"][0].register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    for kind, native in (("joule C++", True), ("joule Py", False)):
        kinds[kind + " (idle)"] = model()
        joule.torch.register_comm_hook(kinds[kind + " (idle)"][0], native=native)
        kinds[kind + " + edges"] = model()
        joule.torch.register_comm_hook(kinds[kind + " + edges"][0], native=native).edges = clock
    kinds["joule C++ + no-op edges"] = model()
    joule.torch.register_comm_hook(kinds["joule C++ + no-op edges"][0], native=True).edges = NoopEdges()
    kinds["direct"] = model()
    kinds["direct"][0].register_comm_hook(dist.group.WORLD, direct_hook(None))
    kinds["direct + edges"] = model()
    kinds["direct + edges"][0].register_comm_hook(dist.group.WORLD, direct_hook(clock))
    for kind, allreduce in (("session", False), ("session + allreduce", True)):
        kinds[kind] = model()
        sessions[kind] = {"allreduce": allreduce}
    if args.kinds:
        kinds = {k: kinds[k] for k in ["built-in"] + [k for k in args.kinds.split(";") if k != "built-in"]}

    def block(kind, steps):
        ddp, opt = kinds[kind]
        if kind not in sessions:
            return timed(ddp, opt, x, NoRegion(), steps)
        with joule.torch.attribute(ddp, monitor, depth=args.depth, optimizer=opt, **sessions[kind]) as session:
            return timed(ddp, opt, x, session.region, steps)

    for kind in kinds:
        block(kind, 5)  # a session's first use registers its comm hook for good
    clock.flush()
    # The same gradients from each kind (AVG and divide-then-sum agree).
    grads = {}
    for kind, (ddp, opt) in kinds.items():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            ddp(x * (1.0 + dist.get_rank())).float().pow(2).mean().backward()
        grads[kind] = ddp.module.head.weight.grad.detach().clone()
    clock.flush()
    for round_ in range(args.rounds):
        results = {k: [] for k in kinds}
        names = list(kinds)
        for b in range(args.blocks):
            # Each block starts with another kind: a kind's place in the
            # order (right after the flush, say) costs it nothing on average.
            for kind in names[b % len(names):] + names[:b % len(names)]:
                results[kind].extend(block(kind, args.block))
            clock.flush()
        if dist.get_rank() == 0:
            base = statistics.median(results["built-in"])
            print(f"round {round_ + 1}: {dist.get_world_size()} ranks; edges recorded so far: "
                  f"{len(recorder.intervals(0.0, 1e12))}")
            for kind, times in results.items():
                t = statistics.median(times)
                diff = (grads[kind] - grads["built-in"]).abs().max().item()
                print(f"{kind:24s} {1e3 * t:7.2f} ms {100 * (t / base - 1):+6.2f}%  grad diff vs built-in {diff:.2e}",
                      flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
