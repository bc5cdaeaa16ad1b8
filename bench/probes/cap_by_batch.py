#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""On a GPU, read-only: at which batch does a model's step stay under the
GPU's power cap? (issue 53, item 2: ResNet-50 inference at batch 1024 sits
under an H200's cap in 92-100% of reads, and its leave-one-out truths
contradict the samples there; bench/README.md section 16n.) The same model at
a batch the limiter leaves alone tells the fit's error from the limiter's.

Per batch (--batches), one counter-anchored window of --seconds after a 1 s
warm-up (bench/probes/truth_state.py's window): J and ms per step, J per
item, and the GPU's state read with NVML every --sample-ms (SM clock, power,
temperature, the share of reads under the power cap). Then what one NVML read
costs from Python (pynvml; --nvml-calls each): the power, the clock-event
reasons, the energy counter; what reading the cap's state each sampler tick
would add. Writes --out (JSON); prints the largest batch under the cap in
fewer than --max-capped of its reads.

  python3 bench/probes/cap_by_batch.py --model resnet50 --batches 64,128,256,512,1024 --out cap.json
"""
import argparse
import json
import os
import sys
import time

import pynvml
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import joule  # noqa: E402
import gpu_attribution_real_truths as harness  # noqa: E402  (bench/)
from truth_state import GpuStateSampler, window  # noqa: E402  (this folder's)


def by_batch(monitor, sampler, args):
    rows = []
    for batch in args.batches:
        args.resnet_batch = args.gpt_batch = batch
        work = harness.MODELS[args.model](args)
        with work.grad_mode():
            w = window(monitor, sampler, work, args.seconds, args.gpu)
        w["batch"], w["j_per_item"] = batch, w["j_per_step"] / batch
        rows.append(w)
        print(f"batch {batch:5d}: {w['j_per_step']:8.3f} J {w['ms_per_step']:8.2f} ms/step "
              f"{1e3 * w['j_per_item']:7.2f} mJ/item {w['power_w']:5.0f} W {w['sm_mhz']:5.0f} MHz "
              f"capped {100 * w['power_capped']:5.1f}% {w['temperature_c']:4.0f} C", flush=True)
        del work
        torch.cuda.empty_cache()
    return rows


def nvml_costs(handle, reasons, calls):
    """Microseconds per call of each read, from Python."""
    reads = {"power": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
             "clock_event_reasons": lambda: reasons(handle),
             "energy_counter": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)}
    out = {}
    for name, read in reads.items():
        read()
        begin = time.perf_counter()
        for _ in range(calls):
            read()
        out[name] = 1e6 * (time.perf_counter() - begin) / calls
    print("NVML reads from Python, us per call: " + ", ".join(f"{k} {v:.1f}" for k, v in out.items()), flush=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(harness.MODELS), default="resnet50")
    p.add_argument("--train", action="store_true")
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")], default=[64, 128, 256, 512, 1024])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--sample-ms", type=float, default=10.0)
    p.add_argument("--nvml-calls", type=int, default=2000)
    p.add_argument("--max-capped", type=float, default=0.05, help="the share of reads under the cap to accept")
    p.add_argument("--out", default="cap-by-batch.json")
    for name, default in (("gpt-tokens", 1024), ("gpt-width", 1024), ("gpt-layers", 8), ("gpt-vocab", 32768),
                          ("gpu", 0)):
        p.add_argument(f"--{name}", type=int, default=default)
    args = p.parse_args()
    torch.cuda.set_device(args.gpu)
    torch.backends.cudnn.benchmark = False  # as the harness
    monitor = joule.Monitor(interval_ms=100)
    sampler = GpuStateSampler(args.gpu, args.sample_ms / 1e3)
    try:
        rows = by_batch(monitor, sampler, args)
    finally:
        sampler.close()
    costs = nvml_costs(sampler.handle, sampler.reasons, args.nvml_calls)
    under = [r["batch"] for r in rows if r["power_capped"] < args.max_capped]
    print(f"largest batch under the cap in < {100 * args.max_capped:.0f}% of reads: {max(under) if under else None}")
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "gpu": torch.cuda.get_device_name(args.gpu),
                   "driver": pynvml.nvmlSystemGetDriverVersion(), "rows": rows, "nvml_us_per_call": costs,
                   "largest_uncapped_batch": max(under) if under else None}, f, indent=1)


if __name__ == "__main__":
    main()
