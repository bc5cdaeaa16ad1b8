#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Short windows read with and without the measured sample response (issue 53
item 5), against a continuous counter reference. Read-only: changes no GPU
setting.

Two joule.Monitors on one GPU in one process, over the same windows, each
window's edges made on A, then at once on B. B reads the power samples
linearly between a counter step and an edge (joule's method). A did the same
split through the samples' measured response (--a-response auto, with joule
at commit ed5ae18, where Monitor(sample_response=...) existed; the results of
2026-11-30 in bench/results/2026-11-30-h200-short-windows are of that); the
split was worse against the counter and was taken out (bench/README.md
section 3), so without --a-response A is a second monitor like B: a control.
--mode onoff and flat also keep monitor A's power samples ("samples") for
bench/probes/step_split.py.

  --mode resnet  torchvision's ResNet-50 (random weights, synthetic batch of 64
                 3x224x224 images on the GPU, 1000 classes, SGD, bf16
                 autocast, channels_last). After --warmup-s of steps, for
                 --seconds (then up to the end of the current 50-step group):
                 each step is a window; with probability --stall-p a stall
                 (time.sleep, uniform 5-150 ms: the GPU idles) follows a step,
                 inside the next step's window; windows of 10 and of 50
                 consecutive steps are open around them. With --group-stall-ms
                 LO HI, every group of 10 is preceded by a stall of LO-HI ms
                 and its last --steady-tail steps have none: its edges then
                 have idle or steady work on one side, where the reference
                 holds (bench/window_bias_analysis.py's "held"). The monitors
                 synchronize (torch.cuda.synchronize): each edge waits for the
                 GPU.
  --mode flat    as onoff, with a memory-bound elementwise chain (its power
                 flat within ~8 W) on and off in phases of 0.05-0.6 s, and
                 windows of 0.3, 0.5 and 1 s: switches inside most counter
                 steps, and a reference sharp to a few watts (the analysis
                 fits one level per phase).
  --mode onoff   a thread runs bf16 8192x8192 products on and off in random
                 phases of 0.15-2.5 s (bench/gpu_load.py's random mode, seeded
                 alike); after --warmup-s, for --seconds, windows of 0.5, 1 or
                 2 s with random gaps of 0-0.3 s. The windows are time spans:
                 the monitors do not synchronize (the main thread runs no GPU
                 work).

The reference (bench/gpu_window_bias.py's CounterSteps): a thread reads the
GPU's energy counter back to back and keeps each counter step between the two
reads around it, on time.monotonic. Window edges are mapped onto
time.monotonic by each monitor's monotonic_offset_s (read once, as
gpu_window_bias.py does). Windows are settled as they go (a settle() finds a
window's data only while it ended within the sampler's 30 s history).
bench/short_windows_analysis.py reads the JSON:
  setup      GPU name, driver, torch/CUDA/joule versions, args, reads, each
             monitor's monotonic_offset_s, measure_from_s, ...
  monitors   per monitor ("a", "b"): sample_response, method_description
             (Monitor.energy_method(0)), energy_method (Monitor.gpus), methods_seen
             (GpuEnergySource.method of its windows), first_source
  windows    name, kind (step/group10/group50, or "0.5 s"/"1 s"/"2 s"), index,
             stall_s / first_step / length_s, edge_calls_s (time.monotonic
             around each edge's calls), and per monitor "a"/"b": begin_s and
             end_s (time.monotonic), elapsed_s, energy_j, settled, anchored,
             method, scale, warnings
  switches_s the load's switches (resnet: stall starts and ends, and those of
             settle polls of 2 ms and more, setup.poll_spans; onoff: busy
             phases' starts and ends); stalls [[start, end]]; phases
             [[start, end, busy]]
  steps      [[(after_s, before_s, counter_mJ), ...]]: the counter steps
  samples    onoff, flat: monitor A's power samples [begin_s, end_s, power_w]
             on time.monotonic (Monitor.observed_power), for probes/step_split.py

  bench/gpu_install.sh dist /tmp/joule-venv
  /tmp/joule-venv/bin/python bench/gpu_short_windows.py --mode resnet --group-stall-ms 250 450 --steady-tail 8 --out resnet-1.json
  /tmp/joule-venv/bin/python bench/gpu_short_windows.py --mode onoff --out onoff-1.json
  python3 bench/short_windows_analysis.py resnet-1.json onoff-1.json
"""
import argparse
import json
import os
import random
import sys
import threading
import time

import pynvml
import torch

import joule
from gpu_load import busy_until  # this folder's
from gpu_window_bias import CounterSteps  # this folder's


def make_monitor(gpu, synchronize, response):
    if response is None:
        return joule.Monitor(backend="nvml", gpus=[gpu], interval_ms=100.0, synchronize=synchronize)
    try:
        return joule.Monitor(backend="nvml", gpus=[gpu], interval_ms=100.0, synchronize=synchronize,
                             sample_response=response)
    except TypeError as e:  # pybind11 lists the signatures it has, then what it was "Invoked with"
        if "sample_response" in str(e).split("Invoked with")[0]:
            raise
        sys.exit(f"gpu_short_windows.py: this joule ({joule.__version__}, {joule.__file__}) has no "
                 f"joule.Monitor(sample_response=...): it was in commit ed5ae18 only (bench/README.md "
                 f"section 3); leave out --a-response for two alike monitors.\n{e}")


def wait_for_grid(monitor, timeout_s=10.0):
    """The monitor, once its GPU's windows are pinned to counter steps (or timeout_s)."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until and "anchored to energy-counter steps" not in monitor.energy_method(0):
        time.sleep(0.1)
    print(f"monitor ready: {monitor.energy_method(0)}", flush=True)
    return monitor


def describe(monitor, response, windows, key, source_repr):
    """What a monitor says about how it reads the GPU: its own method in
    words (Monitor.energy_method), the GPUs as Monitor.gpus lists them, and
    the methods its windows gave."""
    return {"sample_response": response if response is None or isinstance(response, str) else repr(response),
            "method_description": monitor.energy_method(0),
            "energy_method": [g.get("energy_method") for g in monitor.gpus],
            "gpus": [{k: v for k, v in g.items() if k != "capabilities"} for g in monitor.gpus],
            "methods_seen": sorted({w[key]["method"] for w in windows if w[key].get("method")}),
            "first_source": source_repr}


class Pair:
    """Windows on both monitors (A's edge, then B's), settled as they go."""

    def __init__(self, a, b):
        self.mons = {"a": a, "b": b}
        self.offsets = {k: m.monotonic_offset_s for k, m in self.mons.items()}
        if None in self.offsets.values():
            sys.exit("gpu_short_windows.py: a monitor's clock is virtual (no monotonic_offset_s): not NVML?")
        self.pending, self.windows, self.calls = [], [], {}
        self.outside_ms = {"a": 0.0, "b": 0.0}  # how far an edge was mapped outside the calls that made it
        self.poll_s, self.poll_spans = 0.0, []  # polls of 2 ms and more: the GPU idles (resnet: a switch)
        self.source_repr = {}  # each monitor's first GpuEnergySource, as its repr shows it

    def _edge(self, name, begin):
        called = time.monotonic()
        got = {k: (m.begin_window(name) if begin else m.end_window(name)) for k, m in self.mons.items()}
        return called, time.monotonic(), got

    def begin(self, name):
        self.calls[name] = self._edge(name, True)[:2]

    def end(self, name, **row):
        called, returned, got = self._edge(name, False)
        row["edge_calls_s"] = [self.calls.pop(name), (called, returned)]
        self.pending.append((returned, name, row, got))

    def poll(self, min_age_s=1.0, timeout_s=0.0):
        """Settles the pending windows that ended at least min_age_s ago."""
        start = time.monotonic()
        keep = []
        for item in self.pending:
            ended, name, row, got = item
            if start - ended < min_age_s:
                keep.append(item)
                continue
            settled = {k: self.mons[k].settle(m, timeout_s) for k, m in got.items()}
            if all(m.settled for m in settled.values()) or timeout_s > 0 or start - ended > 20.0:
                self.windows.append(self.row(name, row, settled))
            else:
                keep.append((ended, name, row, got))
        self.pending = keep
        end = time.monotonic()
        self.poll_s += end - start
        if end - start >= 0.002:
            self.poll_spans.append((start, end))

    def row(self, name, row, settled):
        out = {"name": name, **row}
        for k, m in settled.items():
            s = m.gpu_sources[0] if len(m.gpu_sources) else None
            self.source_repr.setdefault(k, repr(s))
            out[k] = {"begin_s": m.begin_s + self.offsets[k], "end_s": m.end_s + self.offsets[k],
                      "elapsed_s": m.elapsed_s, "energy_j": m.gpu_energy_j[0], "settled": m.settled,
                      "anchored": s.counter_anchored if s else None, "method": s.method if s else None,
                      "scale": s.calibration_scale if s else None, "warnings": list(m.warnings)}
            for t, (lo, hi) in zip((out[k]["begin_s"], out[k]["end_s"]), row["edge_calls_s"]):
                self.outside_ms[k] = max(self.outside_ms[k], 1e3 * (lo - t), 1e3 * (t - hi))
        return out


def run_resnet(args, pair, rng, log):
    import torch.nn.functional as F
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    warm_end = time.monotonic() + args.warmup_s
    while time.monotonic() < warm_end:
        step()
        torch.cuda.synchronize()
    log["measure_from_s"] = start = time.monotonic()
    stalls, stall_s, k, last_poll = [], 0.0, 0, start
    lo_ms, hi_ms = args.group_stall_ms
    while time.monotonic() < start + args.seconds or k % 50:
        if k % 10 == 0 and hi_ms > 0:  # between groups of 10: idle before a group begins
            t0 = time.monotonic()
            time.sleep(rng.uniform(lo_ms, hi_ms) / 1e3)
            stalls.append((t0, time.monotonic()))
        if k % 50 == 0:
            pair.begin(f"g50-{k // 50}")
        if k % 10 == 0:
            pair.begin(f"g10-{k // 10}")
        pair.begin(f"step-{k}")
        if stall_s:
            t0 = time.monotonic()
            time.sleep(stall_s)
            stalls.append((t0, time.monotonic()))
        step()
        pair.end(f"step-{k}", kind="step", index=k, stall_s=stall_s)
        if k % 10 == 9:
            pair.end(f"g10-{k // 10}", kind="group10", index=k // 10, first_step=k - 9)
        if k % 50 == 49:
            pair.end(f"g50-{k // 50}", kind="group50", index=k // 50, first_step=k - 49)
        # The next step's stall; none in a group's last --steady-tail steps
        # (steady work before its end edge), none where a group stall comes.
        nxt = (k + 1) % 10
        quiet = hi_ms > 0 and (nxt == 0 or nxt >= 10 - args.steady_tail)
        stall_s = rng.uniform(0.005, 0.150) if rng.random() < args.stall_p and not quiet else 0.0
        k += 1
        if time.monotonic() - last_poll > 1.0:
            pair.poll()
            last_poll = time.monotonic()
    log.update(steps=k, steps_per_s=k / (time.monotonic() - start), stalls=stalls, poll_spans=pair.poll_spans,
               switches_s=sorted(t for s in stalls + pair.poll_spans for t in s), torchvision=torchvision.__version__)


def flat_until(deadline, x):
    """A memory-bound elementwise chain until deadline: its power holds within
    ~8 W on an H200 (a matmul's swings +-40 W under the power limit)."""
    while time.monotonic() < deadline:
        for _ in range(4):
            x.mul_(0.999).add_(0.001)
        torch.cuda.synchronize()


def run_onoff(args, pair, rng, log, gpu):
    phases, stop = [], threading.Event()
    flat = args.mode == "flat"
    lo_s, hi_s = (0.05, 0.6) if flat else (0.15, 2.5)

    def load():  # onoff: bench/gpu_load.py --mode random, with its phases' times kept
        with torch.cuda.device(gpu):
            if flat:
                x = torch.ones(128 * 1024 * 1024, device="cuda", dtype=torch.bfloat16)  # 256 MiB
            else:
                a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
                b = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
            phase_rng, busy = random.Random(args.seed), True
            while not stop.is_set():
                length_s = phase_rng.uniform(lo_s, hi_s)
                busy = not busy
                t0 = time.monotonic()
                if busy:
                    flat_until(t0 + length_s, x) if flat else busy_until(t0 + length_s, a, b)
                else:
                    stop.wait(length_s)
                phases.append((t0, time.monotonic(), busy))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    time.sleep(args.warmup_s)
    log["measure_from_s"] = start = time.monotonic()
    k, samples, kept_until = 0, [], start - 5.0

    def keep_samples():  # monitor A's power samples (its history holds 30 s), on time.monotonic
        nonlocal kept_until
        a, off = pair.mons["a"], pair.offsets["a"]
        now = a.clock_s()
        new = [(b + off, e + off, p) for b, e, p in a.observed_power(0, kept_until - off, now)]
        samples.extend(x for x in new if x[1] > kept_until)
        kept_until = max([kept_until] + [x[1] for x in new])

    while time.monotonic() < start + args.seconds:
        if time.monotonic() - kept_until > 15.0:
            keep_samples()
        length_s = rng.choice([0.3, 0.5, 1.0] if flat else [0.5, 1.0, 2.0])
        time.sleep(rng.uniform(0.0, 0.3))
        pair.begin(f"w-{k}")
        time.sleep(length_s)
        pair.end(f"w-{k}", kind=f"{length_s:g} s", index=k, length_s=length_s)
        pair.poll()
        k += 1
    time.sleep(0.5)  # the load runs on past the last end edge
    stop.set()
    thread.join()
    keep_samples()
    log.update(samples=samples, phases=phases, switches_s=sorted(t for p in phases if p[2] for t in p[:2]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", required=True, choices=["resnet", "onoff", "flat"])
    parser.add_argument("--seconds", type=float, help="measured time (default: resnet 90, onoff 120)")
    parser.add_argument("--warmup-s", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gpu", type=int, default=0, help="the GPU (NVML and CUDA index, PCI bus order)")
    parser.add_argument("--stall-p", type=float, default=0.3, help="resnet: the chance of a stall after a step")
    parser.add_argument("--group-stall-ms", type=float, nargs=2, default=[0.0, 0.0], metavar=("LO", "HI"),
                        help="resnet: a stall of LO-HI ms before every group of 10 (0 0: none), so that the "
                             "reference holds a steady power at group edges")
    parser.add_argument("--steady-tail", type=int, default=4,
                        help="resnet, with --group-stall-ms: no stall in a group's last this many steps")
    parser.add_argument("--size", type=int, default=8192, help="onoff: the matrices' size")
    parser.add_argument("--switch-interval-ms", type=float, default=1.0,
                        help="sys.setswitchinterval: how long the counter thread may wait for the GIL (Python: 5)")
    parser.add_argument("--a-response", choices=["auto"], default=None,
                        help="monitor A with sample_response=\"auto\" (joule at commit ed5ae18 only); without "
                             "it A reads as B does: a control of two monitors alike")
    parser.add_argument("--response-json", help="A: a joule.SampleResponse(**dict) from this JSON, not \"auto\"")
    parser.add_argument("--out", required=True, help="the windows and the counter steps (JSON)")
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 90.0 if args.mode == "resnet" else 120.0

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    sys.setswitchinterval(args.switch_interval_ms / 1000.0)  # the training loop holds the GIL while it launches
    torch.cuda.set_device(args.gpu)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)
    reference = CounterSteps([handle])
    time.sleep(1.0)  # steps before the first edge

    response_a = args.a_response
    if args.response_json:
        with open(args.response_json) as f:
            d = json.load(f)
        keep = ("response_ms", "first_lag_ms", "rounds", "rounds_first_lag_ms")
        response_a = joule.SampleResponse(**{k: v for k, v in d.items() if k in keep})
    sync = torch.cuda.synchronize if args.mode == "resnet" else None
    # One after the other: two grid searches at once beside the reference's
    # back-to-back reads slowed every read, and one monitor gave up anchoring.
    a = wait_for_grid(make_monitor(args.gpu, sync, response_a))
    b = wait_for_grid(make_monitor(args.gpu, sync, None))
    pair = Pair(a, b)
    log = {"monitors_made_s": time.monotonic()}
    rng = random.Random(f"{args.mode}-{args.seed}")  # not the load's stream (onoff: Random(seed), as gpu_load.py)
    if args.mode == "resnet":
        run_resnet(args, pair, rng, log)
    else:
        run_onoff(args, pair, rng, log, args.gpu)
    pair.poll(min_age_s=0.0, timeout_s=5.0)
    time.sleep(0.5)  # steps past the last end edge
    reference.finish()

    windows = sorted(pair.windows, key=lambda w: w["a"]["begin_s"])
    setup = {"mode": args.mode, "args": vars(args), "gpu": args.gpu, "name": pynvml.nvmlDeviceGetName(handle),
             "driver": pynvml.nvmlSystemGetDriverVersion(), "torch": torch.__version__,
             "cuda": torch.version.cuda, "joule_version": joule.__version__, "reads": reference.reads,
             "monotonic_offset_s": pair.offsets, "edge_outside_calls_ms": pair.outside_ms,
             "settle_poll_s": pair.poll_s,
             **{k: v for k, v in log.items() if k not in ("stalls", "phases", "switches_s", "samples")}}
    monitors = {k: describe(m, response_a if k == "a" else None, windows, k, pair.source_repr.get(k))
                for k, m in pair.mons.items()}
    for k, d in monitors.items():
        print(f"monitor {k}: sample_response={d['sample_response']}, methods {d['methods_seen']}: "
              f"{d.get('method_description', d.get('energy_method'))}")
    unsettled = sum(not (w["a"]["settled"] and w["b"]["settled"]) for w in windows)
    print(f"{args.mode}: {len(windows)} windows ({unsettled} not settled on both), "
          f"{len(reference.steps[0])} counter steps from {reference.reads[0]} reads; edges mapped at most "
          f"{max(pair.outside_ms.values()):.3f} ms outside their calls", flush=True)
    with open(args.out, "w") as out:
        json.dump({"setup": setup, "monitors": monitors, "switches_s": log["switches_s"],
                   "stalls": log.get("stalls", []), "phases": log.get("phases", []),
                   "samples": log.get("samples", []),
                   "windows": windows, "steps": reference.steps}, out)


if __name__ == "__main__":
    main()
