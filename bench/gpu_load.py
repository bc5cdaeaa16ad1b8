#!/usr/bin/env python3
"""GPU load for the measurement experiments: back-to-back bf16 matrix products.

--mode steady keeps the GPU busy; --mode pulse alternates busy and idle every
--half-period-s seconds, so windows straddle load changes. It only runs
kernels: no GPU setting is touched.
"""
import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["steady", "pulse"], default="steady")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--half-period-s", type=float, default=0.35)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()

    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        phase_end = time.monotonic() + args.half_period_s
        if args.mode == "steady" or int(time.monotonic() / args.half_period_s) % 2 == 0:
            while time.monotonic() < min(phase_end, end):
                for _ in range(4):
                    torch.matmul(a, b)
                torch.cuda.synchronize()
        else:
            time.sleep(max(0.0, min(phase_end, end) - time.monotonic()))


if __name__ == "__main__":
    main()
