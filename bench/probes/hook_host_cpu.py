#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The host's own cost of a recorded step, with no GPU in the way (issue 53,
item 3): the GPT of bench/gpt_model.py, small enough that every op takes a
few microseconds, trained on the CPU, so a step's time is host time alone.
What each kind adds to the forward, backward() and the optimizer is what its
hooks cost the host, per module call, without a GPU that lags or a launch
queue that fills.

Edges: --events fake (the fake CUDA runtime of tests/fake_cudart, loaded
here: joule's whole C++ edge path, cudaEventRecord costing ~nothing),
--events cuda (the real runtime, torch.cuda initialised: each edge a real
cudaEventRecord on the idle GPU's current stream; read-only), --events host
(host instants). Kinds (blocks interleaved, medians against plain):
  empty hooks                a forward pre-hook and a forward hook doing nothing
  hooks + one node pre-hook  the same, with an empty pre-hook on each output's node
  hooks + edges              the hooks record an edge each on the session's clock, nothing else
  joule, forward only        a session with phases=False
  joule, phases              a session
  hooks + one C++ node pre-hook  (--cpp-prehook) the empty pre-hook in C++ (cpp_prehook.py,
                             compiled here against this PyTorch): no Python handle, no GIL in backward
  ... (gc off)               (--gc) plain and joule, phases with the interpreter's collector off

  PYTHONPATH=build/python python3 bench/probes/hook_host_cpu.py [--events fake|cuda|host] [--blocks 20]
      [--block 20] [--kinds "empty hooks;joule, phases"] [--cpp-prehook] [--gc]
(--events fake loads build/tests/fake_cudart's libraries: --fake-cudart, --fake-torch-cuda)
"""
import argparse
import contextlib
import ctypes
import gc
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import joule  # noqa: E402
import joule.torch  # noqa: E402
from gpt_model import SmallGPT  # noqa: E402  (bench/)
from hook_parts import _noop, _outputs, hooked  # noqa: E402  (bench/probes/)
from joule.torch.regions import RegionAttribution  # noqa: E402

PHASES = ("forward", "backward", "optimizer", "step")


def node_prehook(_path):
    def post(_m, _a, out):
        for t in _outputs(out):
            if t.grad_fn is not None:
                t.grad_fn.register_prehook(_noop)
    return post


@contextlib.contextmanager
def collector_off(inner):
    gc.disable()
    try:
        with inner as s:
            yield s
    finally:
        gc.enable()


def timed_step(model, opt, x, y, region):
    """Seconds of the forward (with the loss), backward() and the optimizer, then the step."""
    t = [time.perf_counter()]
    opt.zero_grad(set_to_none=True)
    logits = model(x)
    with region("loss"):
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
    t.append(time.perf_counter())
    loss.backward()
    t.append(time.perf_counter())
    opt.step()
    t.append(time.perf_counter())
    return [b - a for a, b in zip(t, t[1:])] + [t[-1] - t[0]]


def events_for(kind, fake_cudart, fake_torch_cuda):
    """The session's GPU events (None: host instants)."""
    if kind == "host":
        return None
    if kind == "fake":
        ctypes.CDLL(fake_cudart, mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(fake_torch_cuda, mode=ctypes.RTLD_GLOBAL)
    else:
        torch.cuda.init()
    return joule.CudaRuntimeEvents()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", choices=("fake", "cuda", "host"), default="fake")
    p.add_argument("--fake-cudart", default="build/tests/fake_cudart/libcudart.so.13")
    p.add_argument("--fake-torch-cuda", default="build/tests/fake_cudart/libtorch_cuda.so")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--blocks", type=int, default=20)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--kinds", help="kinds separated by ';' (default: all)")
    p.add_argument("--cpp-prehook", action="store_true", help="also the kind with an empty C++ node pre-hook")
    p.add_argument("--gc", action="store_true", help="also plain and joule, phases with the collector off")
    args = p.parse_args()
    torch.set_num_threads(1)  # a step of microsecond ops: threads would only add noise
    torch.manual_seed(0)
    model = SmallGPT(256, args.tokens, args.width, 4, args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 256, (1, args.tokens + 1))
    x, y = ids[:, :-1], ids[:, 1:]
    events = events_for(args.events, args.fake_cudart, args.fake_torch_cuda)
    monitor = joule.Monitor(backend="sim", sim="count=1", interval_ms=100)
    clock_kind = "host" if events is None else "gpu"

    def no_region(_name):
        return contextlib.nullcontext()

    def session(phases):
        return RegionAttribution(model, monitor, depth=args.depth, phases=phases, optimizer=opt, clock=clock_kind,
                                 events=events)

    modules = session(False).modules()
    recorder = joule.RegionRecorder(monitor)
    clock = joule.torch.GpuClock(recorder, events=events) if events is not None else joule.torch.HostClock(recorder)

    kinds = {
        "plain": contextlib.nullcontext,
        "empty hooks": lambda: hooked(modules, lambda p: _noop, lambda p: _noop),
        "hooks + one node pre-hook": lambda: hooked(modules, lambda p: _noop, node_prehook),
        "hooks + edges": lambda: hooked(modules, lambda p: (lambda m, a: clock.begin(p)),
                                        lambda p: (lambda m, a, o: clock.end(p))),
        "joule, forward only": lambda: session(False),
        "joule, phases": lambda: session(True),
    }
    if args.cpp_prehook:
        from cpp_prehook import load  # noqa: E402  (bench/probes/)

        ext = load()

        def cpp_post(_path):
            def post(_m, _a, out):
                for t in _outputs(out):
                    ext.add_prehook(t)
            return post

        kinds["hooks + one C++ node pre-hook"] = lambda: hooked(modules, lambda p: _noop, cpp_post)
    if args.gc:
        kinds["plain (gc off)"] = lambda: collector_off(contextlib.nullcontext())
        kinds["joule, phases (gc off)"] = lambda: collector_off(session(True))
    if args.kinds:
        kinds = {k: kinds[k] for k in ["plain"] + [k for k in args.kinds.split(";") if k != "plain"]}
    print(f"torch {torch.__version__}, CPU, 1 thread; GPT {args.layers} layers, width {args.width}, "
          f"{args.tokens} tokens, batch 1; {len(modules)} modules at depth {args.depth}; edges: {args.events}")
    results = {k: [[] for _ in PHASES] for k in kinds}
    for _ in range(3):  # warm-up
        timed_step(model, opt, x, y, no_region)
    for _ in range(args.blocks):
        for kind, make in kinds.items():
            with make() as s:
                region = s.region if isinstance(s, RegionAttribution) else no_region
                for _ in range(args.block):
                    for column, seconds in zip(results[kind], timed_step(model, opt, x, y, region)):
                        column.append(seconds)
            clock.flush()  # the edges-only kind's clock (a session flushes its own on exit)
    base = [statistics.median(c) for c in results["plain"]]
    calls = len(modules)
    print("us per step, medians (and per module of the", calls, "at this depth, against plain)")
    print(f"{'kind':28s} " + " ".join(f"{ph:>10s}" for ph in PHASES) + "   " +
          " ".join(f"{ph + ' +/mod':>14s}" for ph in PHASES))
    for kind, columns in results.items():
        m = [statistics.median(c) for c in columns]
        print(f"{kind:28s} " + " ".join(f"{1e6 * v:10.1f}" for v in m) + "   " +
              " ".join(f"{1e6 * (v - b) / calls:14.2f}" for v, b in zip(m, base)))


if __name__ == "__main__":
    main()
