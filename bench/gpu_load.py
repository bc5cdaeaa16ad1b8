#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""GPU load for the measurement experiments: back-to-back bf16 matrix products.

--mode steady keeps the GPU busy; --mode pulse alternates busy and idle every
--half-period-s seconds; --mode random switches between busy and idle at
random, each phase lasting --min-phase-s to --max-phase-s (seeded, so a run
can be repeated). Windows then straddle load changes. It only runs kernels:
no GPU setting is touched.
"""
import argparse
import random
import time

import torch


def busy_until(deadline: float, a: torch.Tensor, b: torch.Tensor) -> None:
    while time.monotonic() < deadline:
        torch.matmul(a, b)
        torch.matmul(a, b)
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["steady", "pulse", "random"], default="steady")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--half-period-s", type=float, default=0.35)
    parser.add_argument("--min-phase-s", type=float, default=0.15)
    parser.add_argument("--max-phase-s", type=float, default=2.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()

    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    rng = random.Random(args.seed)
    end = time.monotonic() + args.seconds
    busy = True
    while time.monotonic() < end:
        if args.mode == "steady":
            length_s = end - time.monotonic()
        elif args.mode == "pulse":
            length_s = args.half_period_s
            busy = int(time.monotonic() / args.half_period_s) % 2 == 0
        else:
            length_s = rng.uniform(args.min_phase_s, args.max_phase_s)
            busy = not busy
        phase_end = min(time.monotonic() + length_s, end)
        if busy:
            busy_until(phase_end, a, b)
        else:
            time.sleep(max(0.0, phase_end - time.monotonic()))


if __name__ == "__main__":
    main()
