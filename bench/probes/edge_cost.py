#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: what one region edge of joule.torch.attribute costs on the host,
piece by piece (where the depth-2 overhead of bench/README.md section 16
goes). Changes no GPU setting.

Each piece is timed over N calls back to back, in microseconds per call:
a CUDA event record through torch, a GpuClock edge (joule.GpuEdgeClock:
pool, record, queue) with its default events (the CUDA runtime, recorded from
C++ on the stream PyTorch's C shim names), the same asking Python for the
stream at every edge (before the shim), and with torch's events (the
fallback, through Python), a session edge (GpuClock plus the session's
nesting, C++ since joule._joule.TorchHooks), a tensor hook and a
graph-node pre-hook registered on a fresh autograd graph, and a forward
through a Linear with and without joule's forward hooks.

  /tmp/joule-venv/bin/python bench/probes/edge_cost.py [--n 100000]
(joule installed there first: bench/gpu_install.sh dist /tmp/joule-venv; locally PYTHONPATH=build/python)
"""
import argparse
import time

import torch

import joule
import joule.torch


def per_call_us(fn, n):
    for _ in range(min(n, 1000)):
        fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return 1e6 * (time.perf_counter() - start) / n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100000)
    args = parser.parse_args()
    n = args.n
    monitor = joule.Monitor(interval_ms=100)
    event = torch.cuda.Event(enable_timing=True)
    rows = {"CUDA event record": per_call_us(event.record, n)}

    runtime = joule.torch.clocks.cuda_runtime_events()
    print(f"CUDA runtime: {runtime.runtime_path if runtime else 'not reachable from C++'}"
          f"{f', stream from {runtime.stream_source}' if runtime else ''}")
    python_stream = joule.CudaRuntimeEvents(torch._C._cuda_getCurrentRawStream) if runtime else None
    for label, events in (("CUDA runtime from C++", runtime), ("the same, stream through Python", python_stream),
                          ("torch events", joule.torch.CudaEvents())):
        if events is None:
            continue
        recorder = joule.RegionRecorder(monitor)
        clock = joule.torch.GpuClock(recorder, events=events)
        rows[f"GpuClock edge, {label} (begin+end)/2"] = per_call_us(
            lambda: (clock.begin("a"), clock.end("a")), n // 2) / 2
        clock.flush()

    layer = torch.nn.Linear(64, 64).cuda()
    model = torch.nn.Sequential(layer)
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    with joule.torch.attribute(model, monitor, depth=1, phases=False) as session:
        rows["session edge (begin+end)/2"] = per_call_us(lambda: (session._begin("a"), session._end("a")), n // 2) / 2
        with torch.no_grad():
            rows["Linear forward, hooked (2 edges)"] = per_call_us(lambda: model(x), n // 10)
    with torch.no_grad():
        rows["Linear forward, plain"] = per_call_us(lambda: model(x), n // 10)

    def graph_hooks():
        y = x * 2.0
        y.register_hook(lambda g: None)
        y.grad_fn.register_prehook(lambda g: None)

    def graph_plain():
        x * 2.0

    rows["a tensor hook + a node pre-hook on a fresh op"] = per_call_us(graph_hooks, n // 10) - per_call_us(
        graph_plain, n // 10)
    torch.cuda.synchronize()
    for name, us in rows.items():
        print(f"{name:45s} {us:7.2f} us")


if __name__ == "__main__":
    main()
