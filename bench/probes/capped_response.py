#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""On a GPU, read-only: do the power samples answer the same way when the
GPU sits at its power cap? (issue 53, item 2: ResNet-50 inference at batch
1024 is under an H200's cap in 92-100% of reads, and its fit was made with a
response measured on a ~600 W elementwise load that never reaches the cap;
bench/README.md section 16n.)

Two responses in one lease, each --seconds: joule's own
(joule.torch.measure_sample_response: a memory-bound elementwise chain
against a near-idle spin) and the same alternation with a bf16 matmul of
--matmul-n as the "high" load, which draws the GPU to its cap
(joule.torch.response.alternate). NVML (pynvml) reads the GPU's state every
--sample-ms meanwhile, so each response is stated with the share of its
"high" reads under the cap and the power there. Writes --out-dir:
elementwise.json and matmul.json (the responses, as
gpu_attribution_real_truths.py --response reads them, with the state and the
raw samples and segments), so a stored run can be refitted with either.

  python3 bench/probes/capped_response.py --seconds 30 --out-dir responses
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
import joule.torch  # noqa: E402
from joule.torch.response import alternate  # noqa: E402
from truth_state import GpuStateSampler  # noqa: E402  (this folder's)


def matmul_response(monitor, args, raw):
    a = torch.randn(args.matmul_n, args.matmul_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    settled, recorder = alternate(monitor, lambda: torch.mm(a, b), args.seconds, args.gpu, args.seed)
    raw.update(begin_s=settled.begin_s, end_s=settled.end_s,
               samples=monitor.observed_power(args.gpu, settled.begin_s, settled.end_s),
               intervals=recorder.intervals(settled.begin_s, settled.end_s))
    return joule.fit_sample_response(monitor, settled, recorder, gpu=args.gpu)


def high_state(sampler, raw, monotonic_minus_monitor_s):
    """The GPU's state over the NVML reads inside "high" segments (on the monitor's clock)."""
    spans = [(t0 + monotonic_minus_monitor_s, t1 + monotonic_minus_monitor_s) for name, t0, t1, *_ in raw["intervals"]
             if name == "high"]
    inside = [s for s in sampler.samples if any(t0 <= s[0] <= t1 for t0, t1 in spans)]
    if not inside:
        return {"reads": 0}
    return {"reads": len(inside), "power_w": sum(s[2] for s in inside) / len(inside),
            "sm_mhz": sum(s[1] for s in inside) / len(inside),
            "power_capped": sum(1 for s in inside if s[4] & 0x4) / len(inside)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--matmul-n", type=int, default=8192)
    p.add_argument("--sample-ms", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--out-dir", default="responses")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.cuda.set_device(args.gpu)
    monitor = joule.Monitor(interval_ms=100)
    sampler = GpuStateSampler(args.gpu, args.sample_ms / 1e3)
    monotonic_minus_monitor_s = time.monotonic() - monitor.clock_s()
    try:
        for name in ("elementwise", "matmul"):
            raw = {}
            if name == "matmul":
                response = matmul_response(monitor, args, raw)
            else:
                response = joule.torch.measure_sample_response(monitor, seconds=args.seconds, gpu=args.gpu,
                                                               seed=args.seed, raw=raw, keep=False)
            state = high_state(sampler, raw, monotonic_minus_monitor_s)
            print(f"{name}: {response!r}\n  high: {state}", flush=True)
            with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
                json.dump({"sample_response": response.to_dict(), "high_state": state, "raw": raw,
                           "gpu": torch.cuda.get_device_name(args.gpu),
                           "driver": pynvml.nvmlSystemGetDriverVersion()}, f)
    finally:
        sampler.close()


if __name__ == "__main__":
    main()
