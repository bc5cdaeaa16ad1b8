#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Host time the framework callbacks' shared core (joule._run.EnergyRun, what
joule.hf.EnergyCallback and joule.lightning.EnergyCallback call from their
hooks) spends per training step, on simulated GPUs: no framework and no GPU
needed, so it runs here and in CI-like machines. Each step: step_begin, a
busy wait of --step-ms (the training), step_end, then what the callbacks
log: step_metrics() (Lightning, every --lightning-every steps: the steps its
loggers receive) and interval_metrics() (HF's on_log, every --log-every
steps). Prints the median and 99th percentile of the joule calls' time per
step, early and late in the run (a cost that grows with the run shows
there), and the share of the step.

    PYTHONPATH=build/python python3 bench/frameworks_hook_cost.py --steps 3000 --step-ms 7
    PYTHONPATH=build/python python3 bench/frameworks_hook_cost.py --steps 3000 --work torch

--work torch puts a step of a small PyTorch model between the hooks instead
of the busy wait: the hooks then run with cold caches, as in a training
process (on the H100 host the hooks took 5-10x longer inside a Trainer or
Lightning run than in this loop with the busy wait).
    echo 'device name="NVIDIA H100 80GB HBM3" energy_update_ms=100 energy_call_ms=4 power_update_ms=100' > /tmp/h100.conf
    JOULE_NVML_LIBRARY=build/tests/fake_nvml/libnvidia-ml.so.1 JOULE_FAKE_NVML_CONFIG=/tmp/h100.conf \
      PYTHONPATH=build/python python3 bench/frameworks_hook_cost.py --backend nvml --steps 3000 --step-ms 7
"""
import argparse
import statistics
import time

import joule
import joule.meter
from joule._run import EnergyRun


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def torch_step():
    """One forward, backward and optimizer step of an 8-layer MLP on the CPU (one thread)."""
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)

    def step():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--step-ms", type=float, default=7.0, help="the training's share of a step (busy wait)")
    p.add_argument("--log-every", type=int, default=50, help="HF's logging_steps")
    p.add_argument("--lightning-every", type=int, default=50, help="Lightning's log_every_n_steps")
    p.add_argument("--backend", default="sim", help="sim, or nvml (e.g. the fake H100 of tests/fake_nvml: its "
                   "energy counter steps every 100 ms, so windows settle as late as on the GPU)")
    p.add_argument("--sim", default="count=1,load=1")
    p.add_argument("--work", choices=["spin", "torch"], default="spin",
                   help="the training between the hooks: a busy wait (the hooks stay in the caches), or a step of a "
                        "small PyTorch MLP on the CPU (framework code in between, as in a training process: each "
                        "hook then starts with cold caches)")
    args = p.parse_args()

    train = (lambda: busy(args.step_ms / 1000)) if args.work == "spin" else torch_step()
    monitor = joule.meter.make_monitor(backend=args.backend, sim=args.sim, interval_ms=100.0)
    run = EnergyRun("bench", monitor, summary_file=None)
    run.start()
    costs = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        run.step_begin()
        t1 = time.perf_counter()
        train()
        t2 = time.perf_counter()
        run.step_end(32, 0)
        if (step + 1) % args.lightning_every == 0:
            run.step_metrics()
        if (step + 1) % args.log_every == 0:
            run.interval_metrics()
        costs.append((t1 - t0) + (time.perf_counter() - t2))
    run.finish(None, write=False)
    tenth = max(1, args.steps // 10)
    for label, part in (("first 10%", costs[:tenth]), ("last 10%", costs[-tenth:])):
        q = statistics.quantiles(part, n=100)
        print(f"{label:9s}: median {1e6 * statistics.median(part):7.1f} us, mean {1e6 * statistics.fmean(part):7.1f} us, "
              f"p99 {1e6 * q[98]:7.1f} us a step ({100 * statistics.fmean(part) / (args.step_ms / 1000):.3f}% "
              f"of a {args.step_ms} ms step, mean)")
    print(f"all steps: mean {1e6 * statistics.fmean(costs):.1f} us, max {1e6 * max(costs):.1f} us")
    print(f"pending windows at the end: {len(run.meter._pending)}; steps {args.steps}")


if __name__ == "__main__":
    main()
