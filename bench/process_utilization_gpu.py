#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Does the driver sample each process's SM utilisation, as the exporter's split of a shared GPU
needs (docs/telemetry.md)? Read-only: changes no GPU setting.

Two processes share GPU 0: one runs bf16 matrix products without pause, the other the same products
for `--duty` of each 100 ms period and sleeps the rest. Every second this reads
nvmlDeviceGetProcessUtilization from time 0 (what the driver still holds) and records every sample
(pid, stamp, smUtil); at the end it prints the matrix products each process finished meanwhile (all
alike: the share of the GPU's work each got). bench/process_utilization_split.py turns the records
into the splits the exporter could make.

  /opt/torch/.venv/bin/python bench/process_utilization_gpu.py --seconds 20 --duty 0.25
"""
import argparse
import json
import multiprocessing as mp
import time


def worker(duty, seconds, ready, done):
    import torch
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    ready.set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        period_start = time.monotonic()
        while time.monotonic() - period_start < 0.1 * duty:
            for _ in range(8):
                a @ b
            torch.cuda.synchronize()
            with done.get_lock():
                done.value += 8
        rest = 0.1 - (time.monotonic() - period_start)
        if rest > 0:
            time.sleep(rest)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--duty", type=float, default=0.25, help="the second process's busy fraction")
    parser.add_argument("--out", default=None, help="write the per-second records here (JSON)")
    args = parser.parse_args()
    import pynvml
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    mp.set_start_method("spawn")
    events = [mp.Event(), mp.Event()]
    done = [mp.Value("q", 0), mp.Value("q", 0)]  # matrix products finished: each's share of the GPU's work
    procs = [mp.Process(target=worker, args=(1.0, args.seconds + 5, events[0], done[0])),
             mp.Process(target=worker, args=(args.duty, args.seconds + 5, events[1], done[1]))]
    for p in procs:
        p.start()
    for e in events:
        e.wait(120)
    time.sleep(1.0)
    pids = [p.pid for p in procs]
    done_at_start = [d.value for d in done]
    raw = []  # every (pid, timeStamp, smUtil) the driver returned, asked from 0 each second
    for second in range(int(args.seconds)):
        time.sleep(1.0)
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
        except pynvml.NVMLError as e:
            print(f"t={second + 1:3d}s  no samples: {e}")
            continue
        got = [(s.pid, s.timeStamp, s.smUtil) for s in samples]
        raw.append({"second": second, "samples": got})
        print(f"t={second + 1:3d}s  " + "  ".join(f"pid {p}: {u}% at {t}" for p, t, u in got))
    work = [d.value - start for d, start in zip(done, done_at_start)]
    for p in procs:
        p.terminate()
        p.join()
    print(f"matrix products done meanwhile: {work[0]} / {work[1]}"
          f" (share {work[0] / max(1, sum(work)):.3f} / {work[1] / max(1, sum(work)):.3f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"duty": args.duty, "pids": pids, "raw": raw, "products_done": work}, f, indent=1)


if __name__ == "__main__":
    main()
