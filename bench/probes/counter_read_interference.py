#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Does reading the GPU's energy counter slow a training loop down? (issue 33)

A loop of matmuls with one torch.cuda.synchronize() a step (as the Hugging
Face Trainer's per-step loss check does) runs while a second thread reads
NVML in blocks: on, off, off, on (of --block steps), so drifts cancel. What
the thread reads per kind:
  energy: nvmlDeviceGetTotalEnergyConsumption at --rate per second (joule's
          counter anchors read it 2.5 times a second while windows come;
          each read keeps a CPU busy ~4 ms on an H100)
  energy_fast: the same at ten times --rate (is the cost per read?)
  power:  nvmlDeviceGetPowerUsage at 100 per second (the sampler's tick)
Prints per kind the step period with the reads on and off, and the shift.
Read-only (pynvml's get calls only).

    python3 bench/probes/counter_read_interference.py --step-ms 7 26 --seconds 40
"""
import argparse
import json
import statistics
import threading
import time

import pynvml
import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step-ms", type=float, nargs="+", default=[7.0, 26.0])
    p.add_argument("--seconds", type=float, default=40.0, help="per step length and kind")
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--rate", type=float, default=2.5, help="energy reads per second while on")
    p.add_argument("--kinds", default="energy,energy_fast,power")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    n = 2048
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        a @ b
    torch.cuda.synchronize()
    matmul_s = (time.perf_counter() - t0) / 50
    out = []
    for step_ms in args.step_ms:
        k = max(1, round(step_ms / 1000 / matmul_s))
        for kind in [x for x in args.kinds.split(",") if x]:
            state = {"on": False, "stop": False, "reads": 0}

            def reader():
                period = {"energy": 1.0 / args.rate, "energy_fast": 0.1 / args.rate}.get(kind, 0.01)
                nxt = time.perf_counter()
                while not state["stop"]:
                    nxt += period
                    if state["on"]:
                        if kind.startswith("energy"):
                            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                        else:
                            pynvml.nvmlDeviceGetPowerUsage(handle)
                        state["reads"] += 1
                    time.sleep(max(0.0, nxt - time.perf_counter()))

            th = threading.Thread(target=reader, daemon=True)
            th.start()
            periods = {True: [], False: []}
            step = 0
            begin = last = time.perf_counter()
            while last - begin < args.seconds:
                on = (step // args.block) % 4 in (0, 3)
                state["on"] = on
                for _ in range(k):
                    a @ b
                torch.cuda.synchronize()
                now = time.perf_counter()
                if step % args.block != 0 and now - begin > 2.0:
                    periods[on].append(now - last)
                last = now
                step += 1
            state["stop"] = True
            th.join()
            r = {"step_ms_target": step_ms, "kind": kind, "matmuls": k, "reads": state["reads"],
                 "on_median_ms": statistics.median(periods[True]) * 1e3,
                 "off_median_ms": statistics.median(periods[False]) * 1e3,
                 "on_mean_ms": statistics.fmean(periods[True]) * 1e3,
                 "off_mean_ms": statistics.fmean(periods[False]) * 1e3}
            r["shift_mean"] = r["on_mean_ms"] / r["off_mean_ms"] - 1
            r["shift_median"] = r["on_median_ms"] / r["off_median_ms"] - 1
            print(json.dumps(r), flush=True)
            out.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
