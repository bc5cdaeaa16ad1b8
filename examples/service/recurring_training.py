#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Recurring training through `joule serve`: one node's share of a job.

Each recurrence asks the service for its batch size (and the power limit
when a profile for that batch size was published), trains a small PyTorch
model to a target loss on synthetic data, and reports its energy and time.
The just-in-time power-limit optimizer profiles the limits during the first
epoch when the service has no advice, and publishes what it measured, so
the next recurrence with that batch size, on any node, skips profiling.

Run it on several nodes against one service, at the same time or not:

    joule serve --store sqlite:jobs.db --listen 127.0.0.1:8321 &
    python3 examples/service/recurring_training.py --node node-a --recurrences 5
    python3 examples/service/recurring_training.py --node node-b --recurrences 5
    joule jobs show toy-regression

The model trains on the CPU (or on CUDA when torch sees it). On machines
without a GPU, point joule at simulated GPUs (JOULE_SIM) or the tests' fake
libnvidia-ml.so.1 (JOULE_NVML_LIBRARY, JOULE_FAKE_NVML_CONFIG); --work-ms then
stands in for the GPU's share of each step. Profiling is short (three
limits, a few steps each) to fit the toy's short runs; on real GPUs a limit
change takes ~1 s to show in NVML's power reading, so a real job keeps the
optimizer's own defaults (and runs long enough for them). Changing limits
needs root or jouled; without them the optimizer only observes and
publishes nothing.

One line per recurrence goes to stdout (JSON with --json); the optimizer's
profile reports go to stderr.
"""
import argparse
import json
import os
import sys
import time

import torch

import joule
import joule.torch

SAMPLES = 1024
FEATURES = 16


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("JOULE_SERVICE_URL", "http://127.0.0.1:8321"),
                   help="the service (default: $JOULE_SERVICE_URL, else http://127.0.0.1:8321)")
    p.add_argument("--job", default="toy-regression", help="job name (registered on first use)")
    p.add_argument("--node", default=os.uname().nodename, help="this node's name in the service (default: host name)")
    p.add_argument("--recurrences", type=int, default=3, help="training runs to do, one after the other")
    p.add_argument("--batch-sizes", default="32,64,128", help="the job's batch sizes, increasing")
    p.add_argument("--default-batch-size", type=int, default=64)
    p.add_argument("--eta", type=float, default=0.5, help="energy (1) vs time (0) in the Zeus cost")
    p.add_argument("--max-epochs", type=int, default=30, help="a run that has not reached the target by then failed")
    p.add_argument("--target-loss", type=float, default=0.05, help="mean squared error that counts as trained")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--work-ms", type=float, default=20.0,
                   help="sleep per step of 64 samples, standing in for GPU work (0 on real GPUs); "
                        "larger batches take longer per step but less per sample")
    p.add_argument("--limits", type=int, default=3,
                   help="power limits to try, evenly spaced from the GPUs' largest to their smallest")
    p.add_argument("--warmup-steps", type=int, default=1)
    p.add_argument("--measure-steps", type=int, default=3)
    p.add_argument("--min-measure-s", type=float, default=0.0)
    p.add_argument("--screening-rounds", type=int, default=2,
                   help="rounds of every limit before deciding (real jobs keep the defaults: 3 screening rounds, "
                        "then 20 confirming rounds of the best limit against the one in force)")
    p.add_argument("--confirming-rounds", type=int, default=0,
                   help="rounds confirming the screening's best limit against the one in force (0: decide at once)")
    p.add_argument("--interval-ms", type=float, default=5.0, help="the monitor's sampling interval")
    p.add_argument("--json", action="store_true", help="one JSON object per recurrence on stdout")
    args = p.parse_args(argv)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    if args.recurrences < 1 or args.max_epochs < 1:
        p.error("--recurrences and --max-epochs must be at least 1")
    if args.limits < 2:
        p.error("--limits must be at least 2")
    return args


def register(client, args, monitor):
    """Registers the job for the monitor's GPUs; a job already there is kept."""
    gpu = monitor.gpus[0]
    if "max_limit_w" not in gpu:
        raise joule.Error(f"cannot read the power limits of {gpu['name']}: the job's max_power_w needs them")
    try:
        client.register_job(args.job, args.batch_sizes, args.default_batch_size, max_power_w=gpu["max_limit_w"],
                            eta=args.eta, gpu_model=gpu["name"], gpu_count=len(monitor.gpus),
                            target_metric=f"mse<{args.target_loss:g}", max_epochs=args.max_epochs)
    except joule.ServiceError as e:
        if e.status != 409:
            raise
        print(f"note: job '{args.job}' is registered with another spec; using that one ({e})", file=sys.stderr)


def synthetic_data(seed):
    """A noisy linear regression problem; the same for every recurrence."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    return x, x @ w + 0.1 * torch.randn(SAMPLES, 1, generator=g)


def train_epoch(model, optimizer, data, batch_size, callbacks, work_s):
    x, y = data
    device = next(model.parameters()).device
    for i in range(0, SAMPLES, batch_size):
        with callbacks.step():
            xb, yb = x[i:i + batch_size].to(device), y[i:i + batch_size].to(device)
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(work_s * (0.75 + batch_size / 256))
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).item()


def run_recurrence(client, args, monitor, data):
    """One recurrence, start to report; returns what it did."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with joule.torch.BatchSizeRecurrence(client, args.job, node=args.node, monitor=monitor) as rec:
        gpu = monitor.gpus[0]
        step_w = max((gpu["max_limit_w"] - gpu["min_limit_w"]) / (args.limits - 1), 1.0)
        plo = rec.make_power_limit_optimizer(step_w=step_w, warmup_steps=args.warmup_steps,
                                             measure_steps=args.measure_steps, min_warmup_s=args.min_measure_s / 2,
                                             min_measure_s=args.min_measure_s,
                                             screening_rounds=args.screening_rounds,
                                             confirming_rounds=args.confirming_rounds)
        callbacks = joule.torch.TrainingCallbacks(plo)
        torch.manual_seed(rec.recurrence_id)
        model = torch.nn.Linear(FEATURES, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
        reached, epochs, loss = False, 0, float("nan")
        while epochs < args.max_epochs and not reached:
            with callbacks.epoch():
                loss = train_epoch(model, optimizer, data, rec.batch_size, callbacks, args.work_ms / 1000)
            epochs += 1
            reached = loss <= args.target_loss
            if not reached and rec.report_progress(epochs):  # the service keeps it and advises
                break
        cost = rec.finish(reached_target=reached)
        return {
            "node": args.node, "recurrence_id": rec.recurrence_id, "batch_size": rec.batch_size,
            "advised_limit_w": rec.power_limit_w, "from_service": plo.from_caller,
            "limits_profiled": len(plo.profile), "chosen_limit_w": plo.chosen_limit_w,
            "profile_published": rec.profile_published, "observer": plo.observer,
            "epochs": epochs, "loss": loss, "reached_target": reached, "cost": cost,
        }


def describe(r):
    advice = f"{r['advised_limit_w']:.0f} W from the service" if r["from_service"] else (
        f"profiled {r['limits_profiled']} limits" + (", published" if r["profile_published"] else ""))
    chosen = "its original limit (profiling did not finish)" if r["chosen_limit_w"] is None else (
        f"{r['chosen_limit_w']:.0f} W")
    outcome = "reached the target" if r["reached_target"] else "did not reach the target"
    epochs = f"{r['epochs']} epoch" + ("" if r["epochs"] == 1 else "s")
    return (f"{r['node']}: recurrence {r['recurrence_id']}: batch size {r['batch_size']}, {advice}, trained at "
            f"{chosen}; {outcome} in {epochs} (loss {r['loss']:.4f}), cost {r['cost']:.1f}")


def main(argv=None):
    args = parse_args(argv)
    client = joule.BatchSizeClient(args.url)
    monitor = joule.Monitor(interval_ms=args.interval_ms, synchronize=joule.torch.synchronizer())
    register(client, args, monitor)
    data = synthetic_data(seed=1)
    for _ in range(args.recurrences):
        result = run_recurrence(client, args, monitor, data)
        print(json.dumps(result) if args.json else describe(result), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (joule.ServiceError, joule.Error) as e:
        print(f"recurring_training: {e}", file=sys.stderr)
        sys.exit(1)
