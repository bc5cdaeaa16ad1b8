#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""On a GPU, read-only: why do leave-one-out truths move between runs?
(issue 53, item 2: ResNet-50 training's single truths summed to -15.4% of
their truth left out together in one run and +12.8% in another, where the
GPT's add up to 98.6-102%; bench/README.md section 16l.)

The truths of bench/gpu_attribution_real_truths.py, without the attributed
run: in --rounds rounds, the full step, the step with each module that can be
left out replaced by Identity, and the step with all of them left out at
once, each looped --seconds in a counter-anchored window after a 1 s warm-up
(the full step again after the last round). Per window, J and ms per step
and what the GPU did meanwhile, read with NVML (pynvml) every --sample-ms:
the SM clock, the power, the temperature, and the share of reads whose
clock-event reasons hold the clocks under the power cap or a slowdown.

Per module: its truth in energy (the full step around the round less the
step without it) and in time, their ratio (the power the step loses with
the module), the SM clock the step gains without it, and the spread of each
over the rounds; the sum of single truths against the truth together, in
energy and in time. Writes --out (JSON) with every window.

  python3 bench/probes/truth_state.py --model resnet50 --train --resnet-batch 512 --out state.json
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time

import pynvml
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import joule  # noqa: E402
import gpu_attribution_proof as proof  # noqa: E402  (bench/)
import gpu_attribution_real_truths as harness  # noqa: E402  (bench/)

SW_POWER_CAP = 0x4
# HW slowdown, SW thermal, HW thermal, HW power brake: anything but the cap that holds the clocks down.
SLOWDOWNS = 0x8 | 0x20 | 0x40 | 0x80
FULL = "_full"


class GpuStateSampler:
    """A thread reading the GPU's SM clock, power, temperature and clock-event reasons every period (read-only)."""

    def __init__(self, index, period_s):
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.period_s, self.samples, self.stop = period_s, [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            h = self.handle
            self.samples.append((time.monotonic(), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                                 pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                                 pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU), self.reasons(h)))
            self.stop.wait(self.period_s)

    def between(self, begin_s, end_s):
        """What the GPU did between two monotonic instants: means and shares of the reads."""
        reads = [s for s in self.samples if begin_s <= s[0] <= end_s]
        share = lambda mask: sum(1 for s in reads if s[4] & mask) / len(reads)  # noqa: E731
        mean = lambda i: statistics.fmean(s[i] for s in reads)  # noqa: E731
        return {"reads": len(reads), "sm_mhz": mean(1), "power_w": mean(2), "temperature_c": mean(3),
                "power_capped": share(SW_POWER_CAP), "slowed": share(SLOWDOWNS)}

    def close(self):
        self.stop.set()
        self.thread.join()


def window(monitor, sampler, work, seconds, gpu):
    """One window of steps after a warm-up: J and ms per step and the GPU's state."""
    proof.run_for(work.step, 1.0)
    begin = time.monotonic()
    steps, energy_j, elapsed_s, _ = proof.measured_window(monitor, "truth", work.step, seconds, gpu)
    state = sampler.between(begin, time.monotonic())
    return {"steps": steps, "j_per_step": energy_j / steps, "ms_per_step": 1e3 * elapsed_s / steps, **state}


def rounds_of(monitor, sampler, work, args):
    """Per variant (FULL, each path, harness.TOGETHER): its windows, in order; FULL has one more than the rounds."""
    windows = {FULL: [], **{p: [] for p in work.removable}, harness.TOGETHER: []}
    for r in range(args.rounds):
        windows[FULL].append(window(monitor, sampler, work, args.seconds, args.gpu))
        for path in work.removable:
            with harness.left_out(work.model, path):
                windows[path].append(window(monitor, sampler, work, args.seconds, args.gpu))
        with contextlib.ExitStack() as stack:
            for path in work.removable:
                stack.enter_context(harness.left_out(work.model, path))
            windows[harness.TOGETHER].append(window(monitor, sampler, work, args.seconds, args.gpu))
        full = windows[FULL][-1]
        print(f"round {r + 1}: full {full['j_per_step']:.3f} J {full['ms_per_step']:.2f} ms {full['power_w']:.0f} W "
              f"{full['sm_mhz']:.0f} MHz capped {100 * full['power_capped']:.0f}% {full['temperature_c']:.0f} C",
              flush=True)
    windows[FULL].append(window(monitor, sampler, work, args.seconds, args.gpu))
    return windows


def truths_of(windows):
    """Per variant but FULL: per round, the full step around it less the step without (J, ms, MHz)."""
    around = {key: proof.around_rounds([w[key] for w in windows[FULL]])
              for key in ("j_per_step", "ms_per_step", "sm_mhz", "power_capped")}
    out = {}
    for name, ws in windows.items():
        if name == FULL:
            continue
        out[name] = [{"j": around["j_per_step"][k] - w["j_per_step"], "ms": around["ms_per_step"][k] - w["ms_per_step"],
                      "mhz_gained": w["sm_mhz"] - around["sm_mhz"][k],
                      "capped_change": w["power_capped"] - around["power_capped"][k]} for k, w in enumerate(ws)]
    return out


def spread(values):
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def report(windows, truths):
    print("\nwindow means over rounds: J/step, ms/step, W (NVML), SM MHz, power-capped share, slowed share, C")
    for name, ws in windows.items():
        mean = lambda key: statistics.fmean(w[key] for w in ws)  # noqa: E731
        print(f"  {name:24s} {mean('j_per_step'):8.3f} J {mean('ms_per_step'):8.2f} ms {mean('power_w'):6.0f} W "
              f"{mean('sm_mhz'):6.0f} MHz {100 * mean('power_capped'):5.1f}% {100 * mean('slowed'):5.1f}% "
              f"{mean('temperature_c'):5.1f} C")
    print("\ntruths per module, mean (sd over rounds): energy, time, power lost with it, SM clock gained without it")
    for name, rounds in truths.items():
        js, mss, mhz = ([r[k] for r in rounds] for k in ("j", "ms", "mhz_gained"))
        watts = [1e3 * j / ms for j, ms in zip(js, mss) if ms > 0]
        print(f"  {name:24s} {statistics.fmean(js):7.3f} J ({spread(js):.3f})  {statistics.fmean(mss):7.3f} ms "
              f"({spread(mss):.3f})  {statistics.fmean(watts) if watts else float('nan'):6.0f} W  "
              f"{statistics.fmean(mhz):+5.0f} MHz ({spread(mhz):.0f})  rounds J: " +
              ", ".join(f"{j:.2f}" for j in js))
    singles = [n for n in truths if n != harness.TOGETHER]
    for key, unit in (("j", "J"), ("ms", "ms")):
        per_round = [(sum(truths[n][k][key] for n in singles), truths[harness.TOGETHER][k][key])
                     for k in range(len(truths[harness.TOGETHER]))]
        print(f"sum of single truths against together ({unit}): " + ", ".join(
            f"{s:.3f} / {t:.3f} ({100 * (s / t - 1):+.1f}%)" for s, t in per_round))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(harness.MODELS), default="resnet50")
    p.add_argument("--train", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=4.0, help="each window")
    p.add_argument("--sample-ms", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="truth-state.json")
    for name, default in (("resnet-batch", 256), ("gpt-batch", 16), ("gpt-tokens", 1024), ("gpt-width", 1024),
                          ("gpt-layers", 8), ("gpt-vocab", 32768), ("gpu", 0)):
        p.add_argument(f"--{name}", type=int, default=default)
    return p.parse_args()


def main():
    args = parse_args()
    torch.cuda.set_device(args.gpu)
    torch.backends.cudnn.benchmark = False  # as the harness: the same kernels in every variant
    torch.manual_seed(args.seed)
    monitor = joule.Monitor(interval_ms=100)
    sampler = GpuStateSampler(args.gpu, args.sample_ms / 1e3)
    work = harness.MODELS[args.model](args)
    try:
        with work.grad_mode():
            print(f"{args.model} ({'training' if args.train else 'inference'}): step {proof.gpu_ms(work.step):.2f} ms, "
                  f"{len(work.removable)} modules to leave out, {args.rounds} rounds of {args.seconds} s windows",
                  flush=True)
            windows = rounds_of(monitor, sampler, work, args)
    finally:
        sampler.close()
    truths = truths_of(windows)
    report(windows, truths)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "gpu": torch.cuda.get_device_name(args.gpu),
                   "driver": pynvml.nvmlSystemGetDriverVersion(), "windows": windows, "truths": truths}, f, indent=1)


if __name__ == "__main__":
    main()
