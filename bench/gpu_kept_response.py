#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Read-only: a sample response measured once on this GPU is kept for its
model and driver (joule.SampleResponseStore) and used by a later attribution
in another process, with a note naming its file; a response kept only for
another driver is not used (a warning says to measure again). Changes no GPU
setting. Issue 53, item 2.

  python3 bench/gpu_kept_response.py measure [--seconds 30]     # keeps the response
  python3 bench/gpu_kept_response.py attribute [--seconds 10]   # a small training loop, attributed
(JOULE_SAMPLE_RESPONSE_DIR: where responses are kept; bench/gpu_kept_response.sh runs all three steps)
"""
import argparse
import time
import warnings

import torch

import joule
import joule.attribution
import joule.sample_response
import joule.torch


def measure(seconds):
    monitor = joule.Monitor(gpus=[0], interval_ms=100)
    started = time.perf_counter()
    response = joule.torch.measure_sample_response(monitor, seconds=seconds)
    model = joule.sample_response.gpu_model(monitor, 0)
    print(f"measured in {time.perf_counter() - started:.0f} s: {response!r}")
    print(f"kept for {model[0]}, driver {model[1]}: {joule.SampleResponseStore().path_for(*model)}")


def attribute(seconds):
    monitor = joule.Monitor(gpus=[0], interval_ms=100)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(4096, 4096, device="cuda")
    steps = 0
    with joule.torch.attribute(model, monitor, optimizer=opt) as session:
        with monitor.window("train") as w:
            until = time.perf_counter() + seconds
            while time.perf_counter() < until:
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
                steps += 1
            torch.cuda.synchronize()
    settled = w.settled(timeout_s=5.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [a] = session.result(settled, bootstrap_rounds=50)
    for warning in caught:
        print(f"warning: {warning.message}")
    print(f"{steps} steps in {settled.elapsed_s:.1f} s")
    print(joule.attribution.format_table(a, gpu_label="GPU 0"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("measure", "attribute"))
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    if args.step == "measure":
        measure(args.seconds or 30.0)
    else:
        attribute(args.seconds or 10.0)


if __name__ == "__main__":
    main()
