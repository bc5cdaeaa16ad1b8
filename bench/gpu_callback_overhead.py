#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What joule's optimizer callbacks cost per training step on a real GPU, side by side.

A/B blocks interleaved in one run, so drift (clocks, temperature, other tenants)
hits both alike: blocks of steps without joule open, blocks with a session open
(its sampler thread running) but no callbacks, and blocks with the power-limit
optimizer's callbacks (observer mode, read-only) around every step. Reports
each kind's median step time and the ratios.

  /tmp/joule-venv/bin/python bench/gpu_callback_overhead.py --batch 32
--lib defaults to the installed joule package's libjoule_c.so, else
build/lib/libjoule_c.so (gpu_train_observer.default_lib).
"""
import argparse
import json
import statistics

import torch

from gpu_train_observer import default_lib, load_joule, model_and_step, timed_steps


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lib", default=None, help="libjoule_c.so (default: the installed joule package's)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--block", type=int, default=200, help="steps per block")
    parser.add_argument("--repeats", type=int, default=20, help="blocks of each kind")
    parser.add_argument("--warmup", type=int, default=50, help="steps before measuring")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = model_and_step(device, args.batch)
    timed_steps(step, args.warmup)
    lib = load_joule(args.lib or default_lib())
    options = {"interval_ms": 100, "power_limit": {"objective": "cost", "observer": True, "min_warmup_s": 1.5,
                                                   "job": "overhead", "batch_size": args.batch}}
    closed, sampling, callbacks = [], [], []
    for _ in range(args.repeats):
        closed += timed_steps(step, args.block)
        session = lib.joule_session_open(json.dumps(options).encode())
        if not session:
            raise SystemExit("joule: " + lib.joule_last_error().decode())
        lib.joule_on_epoch_begin(session)
        sampling += timed_steps(step, args.block)
        callbacks += timed_steps(step, args.block, lambda: lib.joule_on_step_begin(session),
                                 lambda: lib.joule_on_step_end(session))
        lib.joule_on_epoch_end(session)
        lib.joule_session_close(session)
    kinds = {"closed": closed, "sampling": sampling, "callbacks": callbacks}
    med = {name: statistics.median(times) for name, times in kinds.items()}
    print(f"device {torch.cuda.get_device_name(0) if device == 'cuda' else 'cpu'}, batch {args.batch}, "
          f"{args.repeats} x {args.block} steps of each kind, interleaved")
    for name, times in kinds.items():
        print(f"  {name:<10} median {med[name] * 1e3:.4f} ms, mean {statistics.mean(times) * 1e3:.4f} ms")
    print(f"sampler thread (session open, no callbacks) vs closed: {100 * (med['sampling'] / med['closed'] - 1):+.3f}%")
    print(f"callbacks vs session open without them:          {100 * (med['callbacks'] / med['sampling'] - 1):+.3f}%")
    print(f"callbacks and sampler vs closed:                 {100 * (med['callbacks'] / med['closed'] - 1):+.3f}%")


if __name__ == "__main__":
    main()
