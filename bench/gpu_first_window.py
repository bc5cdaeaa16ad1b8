#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Is the first window of a measurement as exact as the later ones? Read-only.

Under torchrun (NCCL or Gloo, joule.distributed) or as one process
(--single: a plain joule.Monitor over every GPU), after a few warm-up training
steps: the monitor is made, then windows follow at once: idle, idle again,
steady training, idle. Two references per GPU: "edge" reads every GPU's
energy counter right after each begin edge and right before each end edge (as
bench/gpu_distributed.py: each read is up to one counter step, 100 ms, stale,
which matters where power changes at the edge), and "cont" reads the counters
back to back on a thread of the node's first local rank for the whole run,
places each counter step between the reads that saw it, and interpolates the
counter between steps at the leader's own edge instants (linearly: where the
load switches at an edge, as at the steady window's, that reading is itself
off by up to ~0.5%; bench/gpu_window_bias.py and window_bias_analysis.py keep
the steps and read each edge as its load requires). For the leader, each
GPU's method, calibration scale and whether the window was pinned to counter
steps are printed too.

  torchrun --nproc-per-node 2 bench/gpu_first_window.py --backend nccl --out nccl.json
  python3 bench/gpu_first_window.py --single --out single.json
"""
import argparse
import json
import os
import threading
import time

import pynvml
import torch

import joule
import joule.distributed


class RecordingMonitor:
    """A leader's joule.Monitor that keeps the settled Measurement of each
    window and the instants (time.monotonic) its edges were made at.
    (bench/gpu_window_bias.py uses it too.)"""

    def __init__(self, inner):
        self.inner = inner
        self.settled = {}
        self.edges = {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def begin_window(self, name):
        self.edges[name] = [time.monotonic(), None]
        return self.inner.begin_window(name)

    def end_window(self, name):
        self.edges[name][1] = time.monotonic()
        return self.inner.end_window(name)

    def settle(self, m, timeout_s=1.0):
        settled = self.inner.settle(m, timeout_s)
        self.settled[settled.name] = settled
        return settled


def record_leader(monitor):
    """Puts a RecordingMonitor in place of a DistributedMonitor's leader
    monitor (joule.distributed settles every window there); None on the
    other ranks. The leader's report is made by a binding that takes the
    Monitor itself, not a wrapper: it is handed the inner one."""
    if not monitor.leader or monitor.monitor is None:
        return None
    recorder = RecordingMonitor(monitor.monitor)
    monitor.monitor = recorder
    leader_message = joule.distributed._joule.cluster_leader_message
    if not getattr(leader_message, "unwraps_recorder", False):
        def unwrapped(m, *rest, **kw):
            return leader_message(getattr(m, "inner", m), *rest, **kw)

        unwrapped.unwraps_recorder = True
        joule.distributed._joule.cluster_leader_message = unwrapped
    return recorder


class ContinuousCounters:
    """Reads every GPU's energy counter back to back on a thread; energy_j(gpu,
    t0, t1) interpolates the counter between the steps around each instant."""

    def __init__(self, handles):
        self.handles = handles
        self.reads = [[] for _ in handles]  # (midpoint, mJ) per GPU
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for i, h in enumerate(self.handles):
                t0 = time.monotonic()
                value = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
                self.reads[i].append((0.5 * (t0 + time.monotonic()), value))

    def steps(self, gpu):
        reads = list(self.reads[gpu])
        return [(0.5 * (a[0] + b[0]), b[1]) for a, b in zip(reads, reads[1:]) if b[1] != a[1]]

    def energy_j(self, gpu, t0, t1):
        steps = self.steps(gpu)

        def at(t):
            for (ta, va), (tb, vb) in zip(steps, steps[1:]):
                if ta <= t < tb:
                    return va + (vb - va) * (t - ta) / (tb - ta)
            return float("nan")

        return (at(t1) - at(t0)) / 1000.0


def counters_mj(handles):
    return [pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles]


def sources(m):
    return [{"method": s.method, "scale": s.calibration_scale, "anchored": s.counter_anchored} for s in m.gpu_sources]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--single", action="store_true", help="one process, a plain joule.Monitor")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each window")
    parser.add_argument("--prime", action="store_true",
                        help="the leader opens and ends a throwaway window as soon as its monitor is made")
    parser.add_argument("--first-after-s", type=float, default=0.0,
                        help="idle this long between making the monitor and the first window")
    parser.add_argument("--out", help="write the windows' results here (JSON)")
    args = parser.parse_args()

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    dist = torch.distributed
    if not args.single:
        dist.init_process_group(args.backend)
    rank = dist.get_rank() if not args.single else 0
    local = int(os.environ.get("LOCAL_RANK", 0))
    gpu = local % torch.cuda.device_count()
    torch.cuda.set_device(gpu)

    width = 8192
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(6)]).cuda()
    if not args.single:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(2048, width, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    # The continuous reference starts before the load: it must hold counter
    # steps on both sides of the first edge.
    handles = []
    if local == 0:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(torch.cuda.device_count())]
    continuous = ContinuousCounters(handles) if handles else None
    for _ in range(25):
        step()
    torch.cuda.synchronize()
    start = time.monotonic()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    steps = max(1, int(10 / (time.monotonic() - start) * args.seconds))
    if not args.single:
        n = torch.tensor([steps], device="cuda")
        dist.all_reduce(n, op=dist.ReduceOp.MIN)
        steps = int(n.item())


    def barrier():
        torch.cuda.synchronize()
        if not args.single:
            dist.barrier()

    made_s = time.monotonic()
    if args.single:
        monitor = RecordingMonitor(joule.Monitor())
        recorder = monitor
    else:
        monitor = joule.distributed.DistributedMonitor(timeout_s=120)
        recorder = record_leader(monitor)
    if args.prime and recorder is not None:
        recorder.begin_window("prime")
        recorder.end_window("prime")

    time.sleep(args.first_after_s)
    windows = [("idle-first", lambda: time.sleep(args.seconds)), ("idle-2", lambda: time.sleep(args.seconds)),
               ("steady", lambda: [step() for _ in range(steps)]), ("idle-3", lambda: time.sleep(args.seconds))]
    results = []
    for name, work in windows:
        barrier()
        began_after_s = time.monotonic() - made_s
        monitor.begin_window(name)
        before = counters_mj(handles)
        t0 = time.monotonic()
        work()
        barrier()
        after = counters_mj(handles)
        t1 = time.monotonic()
        if args.single:
            m = monitor.settle(monitor.end_window(name), 2.0)
            joule_j, elapsed_s, src = list(m.gpu_energy_j), m.elapsed_s, sources(m)
        else:
            report = monitor.end_window(name)
            if rank != 0:
                continue
            node = report.json["nodes"][0]
            joule_j = [d["energy_j"] for d in node["devices"] if d["kind"] == "gpu"]
            elapsed_s = node["elapsed_s"]
            src = sources(recorder.settled[name]) if recorder is not None and name in recorder.settled else []
        counter_j = [(b - a) / 1000.0 for a, b in zip(before, after)]
        time.sleep(0.3)  # the continuous reads pass the end edge's next step
        edge_s = recorder.edges.get(name) if recorder is not None else None
        cont_j = ([continuous.energy_j(i, *edge_s) for i in range(len(handles))]
                  if continuous is not None and edge_s else [float("nan")] * len(joule_j))
        row = {"window": name, "began_after_monitor_s": began_after_s, "joule_elapsed_s": elapsed_s,
               "counter_span_s": t1 - t0, "joule_gpu_j": joule_j, "counter_gpu_j": counter_j,
               "continuous_gpu_j": cont_j, "sources": src}
        results.append(row)
        per_gpu = ", ".join(f"joule {j:.1f} J, edge {c:.1f} J ({100 * (j / c - 1):+.2f}%), cont {r:.1f} J "
                            f"({100 * (j / r - 1):+.2f}%) {s}"
                            for j, c, r, s in zip(joule_j, counter_j, cont_j, src or [{}] * len(joule_j)))
        print(f"{name} (began {began_after_s:.2f} s after the monitor was made, {elapsed_s:.2f} s): {per_gpu}",
              flush=True)
    if continuous is not None:
        continuous.stop.set()
    if rank == 0 and args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
    if not args.single:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
