#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: what each piece of a recorded step's hooks costs on this host
(issue 53, item 3), on the GPT of gpu_attribution_models.py at --depth.
Changes no GPU setting.

Blocks of steps of each kind, interleaved; per kind the median host time to
queue a step and the median step, against plain steps:
  empty hooks          a forward pre-hook and a forward hook that do nothing
  forward wrapper      instead of hooks, module.forward wrapped (torch's fast call path)
  + GPU edges          the hooks record an edge each on a joule.GpuEdgeClock, nothing else
  + tensor hooks       empty hooks that also put torch's Tensor.register_hook on each
                       input and a node pre-hook on each output (what a session registers)
  + node pre-hooks     the same with a pre-hook on each input's node instead of a tensor hook
  + one node pre-hook  empty hooks that put a node pre-hook on each output only
  joule, forward only / joule, phases / joule, phases, host edges: a session
  joule before, phases  the same with joule.torch.regions_before, where it was put
                        beside regions.py (an older regions.py, for a side-by-side)
  hooks + one C++ node pre-hook / wrapper + one C++ node pre-hook (--cpp-prehook): empty
                        forward hooks (or the forward wrapper) putting an empty C++ autograd
                        pre-hook (cpp_prehook.py, compiled against this PyTorch) on each output

  /tmp/joule-venv/bin/python bench/probes/hook_parts.py [--model gpt|resnet50] [--depth 2] [--blocks 8] [--block 10]
      [--kinds "plain,joule, phases"...] [--rounds N] [--switch-interval S] [--profile KIND [--profile-steps N]]
      [--split [--queue N]]

--split: instead, blocks of each kind (interleaved) with the host's time split by phase: the
batch, the forward (to the loss), backward() (until autograd has queued the pass) and the
optimizer; the GPU's wait after the step; and the same steps run --queue at a time with no sync
between them (the throughput where the host may run ahead; the median run and the slowest),
against plain; and the interpreter's garbage collections during each kind's steps.
--profile KIND: instead, torch.profiler over --profile-steps steps of "plain" and of KIND (host
side: torch's ops and the CUDA runtime's calls), and the ops whose host time per step grew most.
  torchrun --standalone --nproc-per-node 2 bench/probes/hook_parts.py --ddp ...   (the model in DDP; rank 0 prints)
"""
import argparse
import contextlib
import gc
import os
import statistics
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import joule  # noqa: E402
import joule.torch  # noqa: E402
from gpu_attribution_models import gpt_workload, no_region, resnet_workload, step  # noqa: E402  (bench/)
from hook_cost import compare, timed  # noqa: E402  (bench/probes/)


def _noop(*_args):
    return None


def _inputs(args):
    return [t for t in args if isinstance(t, torch.Tensor) and t.requires_grad]


def _outputs(out):
    out = out if isinstance(out, tuple) else (out,)
    return [t for t in out if isinstance(t, torch.Tensor) and t.requires_grad]


@contextlib.contextmanager
def hooked(modules, pre, post):
    handles = []
    for path, m in modules:
        handles.append(m.register_forward_pre_hook(pre(path)))
        handles.append(m.register_forward_hook(post(path)))
    try:
        yield None
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def wrapped(modules, on_output=None):
    for _, m in modules:
        inner = m.forward

        if on_output is None:
            def forward(*args, __inner=inner, **kwargs):
                return __inner(*args, **kwargs)
        else:
            def forward(*args, __inner=inner, **kwargs):
                out = __inner(*args, **kwargs)
                for t in _outputs(out):
                    on_output(t)
                return out

        m.forward = forward
    try:
        yield None
    finally:
        for _, m in modules:
            del m.forward


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("gpt", "resnet50"), default="gpt")
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--batch", type=int, help="the batch (default: the GPT's 8, ResNet-50's 128)")
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1, help="the whole comparison, this many times")
    p.add_argument("--kinds", help="the kinds to compare, separated by ';' (default: all)")
    p.add_argument("--ddp", action="store_true", help="the model in DistributedDataParallel (under torchrun)")
    p.add_argument("--switch-interval", type=float, help="sys.setswitchinterval (the GIL's), seconds")
    p.add_argument("--profile", metavar="KIND", help="profile plain steps and KIND's (see above)")
    p.add_argument("--profile-steps", type=int, default=20)
    p.add_argument("--split", action="store_true", help="the host's time by phase, and queued steps (see above)")
    p.add_argument("--queue", type=int, default=10, help="with --split, steps run without a sync between them")
    p.add_argument("--cpp-prehook", action="store_true",
                   help="also the kinds with an empty C++ node pre-hook (cpp_prehook.py compiles it here)")
    args = p.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    gpu, rank = 0, 0
    if args.ddp:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank, gpu = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(gpu)
    if args.model == "gpt":
        work = gpt_workload(args.batch or 8, 12, 1024, 16, 1024, 32000)
    else:
        work = resnet_workload(args.batch or 128)
    if args.ddp:
        work.model = torch.nn.parallel.DistributedDataParallel(work.model, device_ids=[gpu])
    monitor = joule.Monitor(gpus=[gpu], interval_ms=100)
    modules = joule.torch.attribute(work.model, monitor, depth=args.depth).modules()
    recorder = joule.RegionRecorder(monitor)
    clock = joule.torch.GpuClock(recorder)
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"{args.model}{' in DDP' if args.ddp else ''}: {len(modules)} modules at depth {args.depth}; edges from "
        f"{type(clock).__name__}; switch interval {sys.getswitchinterval()} s; Python threads: "
        f"{[t.name for t in threading.enumerate()]}")
    timed(work, no_region, 10)  # warm-up

    def edges_pre(path):
        return lambda m, a: clock.begin(path)

    def edges_post(path):
        return lambda m, a, o: clock.end(path)

    def tensor_pre(path):
        def pre(m, a):
            for t in _inputs(a):
                t.register_hook(_noop)
        return pre

    def node_pre(path):
        def pre(m, a):
            for t in _inputs(a):
                (t.grad_fn.register_prehook if t.grad_fn is not None else t.register_hook)(_noop)
        return pre

    def out_post(path):
        def post(m, a, o):
            for t in _outputs(o):
                if t.grad_fn is not None:
                    t.grad_fn.register_prehook(_noop)
        return post

    def session(phases, clock_kind="gpu"):
        return joule.torch.attribute(work.model, monitor, depth=args.depth, phases=phases, optimizer=work.opt,
                                     clock=clock_kind)

    kinds = {
        "plain": contextlib.nullcontext,
        "empty hooks": lambda: hooked(modules, lambda p: _noop, lambda p: _noop),
        "forward wrapper": lambda: wrapped(modules),
        "hooks + GPU edges": lambda: hooked(modules, edges_pre, edges_post),
        "hooks + tensor hooks": lambda: hooked(modules, tensor_pre, out_post),
        "hooks + node pre-hooks": lambda: hooked(modules, node_pre, out_post),
        "hooks + one node pre-hook": lambda: hooked(modules, lambda p: _noop, out_post),
        "joule, forward only": lambda: session(False),
        "joule, phases": lambda: session(True),
        "joule, phases, host edges": lambda: session(True, "host"),
    }
    if args.cpp_prehook:
        from cpp_prehook import load  # noqa: E402  (bench/probes/)

        ext = load()

        def out_post_cpp(path):
            def post(m, a, o):
                for t in _outputs(o):
                    ext.add_prehook(t)
            return post

        kinds["hooks + one C++ node pre-hook"] = lambda: hooked(modules, lambda p: _noop, out_post_cpp)
        kinds["wrapper + one C++ node pre-hook"] = lambda: wrapped(modules, ext.add_prehook)
    try:
        from joule.torch import regions_before
        kinds["joule before, phases"] = lambda: regions_before.RegionAttribution(
            work.model, monitor, depth=args.depth, phases=True, optimizer=work.opt, clock="gpu")
    except ImportError:
        pass
    if args.profile:
        return profile(work, kinds, args.profile, args.profile_steps, say)
    if args.kinds:
        kinds = {k: kinds[k] for k in args.kinds.split(";")}
    if args.split:
        for _ in range(args.rounds):
            split(work, kinds, args.blocks, args.block, args.queue, say, after_block=clock.flush)
        return None
    for _ in range(args.rounds):
        compare(work, kinds, args.blocks, args.block, say=say, after_block=clock.flush)


PHASES = ("batch", "forward", "backward", "optimizer", "GPU after", "step", "queued step")


def split_step(work, region):
    """One step of gpu_attribution_models.step, the host's time at each phase's
    end: seconds for the batch, the forward, backward() and the optimizer, then
    the wait for the GPU and the whole step."""
    t = [time.perf_counter()]
    with region("data"):
        x, y = work.batch()
    t.append(time.perf_counter())
    work.opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = work.model(x)
        with region("loss"):
            loss = work.loss_fn(out, y)
    t.append(time.perf_counter())
    loss.backward()
    t.append(time.perf_counter())
    work.opt.step()
    t.append(time.perf_counter())
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    return [b - a for a, b in zip(t, t[1:])] + [t[-1] - t[0]]


class CollectorLog:
    """The interpreter's garbage collections while each kind's steps run: per
    kind and generation, how many and their seconds in all (gc.callbacks)."""

    def __init__(self):
        self.kind, self._start = None, None
        self.by_kind = {}
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None and self.kind is not None:
            counts = self.by_kind.setdefault(self.kind, [[0, 0.0] for _ in range(3)])
            counts[info["generation"]][0] += 1
            counts[info["generation"]][1] += time.perf_counter() - self._start

    def close(self):
        gc.callbacks.remove(self._callback)

    def line(self, kind, steps):
        counts = self.by_kind.get(kind, [[0, 0.0] for _ in range(3)])
        return f"{kind:28s} " + "  ".join(f"gen{g} {n:5d} {1e3 * sec:8.2f} ms" for g, (n, sec) in enumerate(counts)) + \
            f"  ({steps} steps)"


def split(work, kinds, blocks, block, queue, say, after_block=lambda: None):
    """Per kind, the median of each phase's host time (PHASES) and of the step
    timed alone, and the median of the mean steps of runs of `queue` steps
    with no sync between them (and the slowest run's); blocks of each kind
    interleaved; the collections that ran during each kind's steps."""
    results = {k: [[] for _ in PHASES] for k in kinds}
    collector = CollectorLog()
    for _ in range(blocks):
        for kind, make in kinds.items():
            with make() as s:
                region = s.region if s is not None else no_region
                collector.kind = kind
                for _ in range(block):
                    for column, seconds in zip(results[kind], split_step(work, region)):
                        column.append(seconds)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(queue):
                    step(work, region)
                torch.cuda.synchronize()
                results[kind][-1].append((time.perf_counter() - t0) / queue)
                collector.kind = None
            after_block()
    collector.close()
    base = [statistics.median(c) for c in results["plain"]]
    say("ms per step: median host time of each phase; the step alone; runs of %d steps, no sync between" % queue)
    say(f"{'kind':28s} " + " ".join(f"{p:>11s}" for p in PHASES) + f" {'step +':>8s} {'queued +':>9s}"
        f" {'slowest run':>12s}")
    for kind, columns in results.items():
        m = [statistics.median(c) for c in columns]
        say(f"{kind:28s} " + " ".join(f"{1e3 * x:11.2f}" for x in m) +
            f" {100 * (m[-2] / base[-2] - 1):+7.2f}% {100 * (m[-1] / base[-1] - 1):+8.2f}%"
            f" {1e3 * max(columns[-1]):9.2f} ms")
    say("the interpreter's collections during each kind's steps (alone and queued):")
    for kind in kinds:
        say(collector.line(kind, blocks * (block + queue)))


def profile(work, kinds, kind, steps, say, top=30):
    """The host's time per step by op (self time), plain against `kind`: the
    ops that grew most, and the totals."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    def device_us(e):  # a kernel's or a copy's own time on the GPU (ops on the host count 0 here)
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):
            return 0.0
        return getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)

    per_step = {}
    for name in ("plain", kind, "plain", kind):  # the first pair warms the profiler up; the second is kept
        with kinds[name]() as s:
            region = s.region if s is not None else no_region
            timed(work, region, 5)
            with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                host, total = timed(work, region, steps)
        events = prof.key_averages()
        per_step[name] = {e.key: (e.count / steps, e.self_cpu_time_total / steps) for e in events}
        host_ms = sum(e.self_cpu_time_total for e in events) / steps / 1e3
        gpu_ms = sum(device_us(e) for e in events) / steps / 1e3
        say(f"{name}: a step {1e3 * sum(total) / steps:.2f} ms, queued in {1e3 * sum(host) / steps:.2f} ms of host "
            f"time under the profiler; ops' self time on the host {host_ms:.2f} ms, kernels on the GPU {gpu_ms:.2f} ms")
    plain, hooked_ = per_step["plain"], per_step[kind]
    grown = sorted(set(plain) | set(hooked_), key=lambda k: hooked_.get(k, (0, 0))[1] - plain.get(k, (0, 0))[1],
                   reverse=True)
    say(f"{'op':48s} {'calls/step':>16s} {'self us/step':>20s} {'grew us':>9s}")
    for key in grown[:top]:
        (cp, tp), (ck, tk) = plain.get(key, (0, 0)), hooked_.get(key, (0, 0))
        say(f"{key[:48]:48s} {cp:7.1f} -> {ck:6.1f} {tp:9.1f} -> {tk:8.1f} {tk - tp:+9.1f}")


if __name__ == "__main__":
    main()
