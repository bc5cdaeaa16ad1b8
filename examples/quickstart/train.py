#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A small training job that runs anywhere, for trying joule (README.md).

    ./build/bin/joule measure -- python3 examples/quickstart/train.py        # the whole run
    PYTHONPATH=build/python python3 examples/quickstart/train.py --joule    # each epoch, from inside
    PYTHONPATH=build/python python3 examples/quickstart/train.py --service http://127.0.0.1:8321

A linear model fitted by mini-batch SGD in plain Python (no PyTorch, no
NumPy): about a second of one CPU core. It stands in for your training
script; on a GPU machine, measure your own the same way. With --joule each
epoch is a joule.window, and the script prints its energy and time. Under
`joule sweep` it appends `samples=N steps=M epochs=K` to $JOULE_REPORT_FILE,
so the analysis gives samples and gradient updates per GPU-hour.

With --service the run is one recurrence of a recurring job (`joule serve`):
it asks the service for its batch size, trains until the loss reaches
--target-loss (or --max-epochs), measured by a joule.window, and reports the
energy and time, from which the service learns the cheapest batch size.
"""
import argparse
import os
import random
import time

# A step's fixed cost, whatever its batch size (on a GPU: kernel launches, the
# optimizer's step), so that the batch size matters here as it does there.
STEP_OVERHEAD_S = 0.0002


def make_data(n, rng):
    """y = 3 x0 - 2 x1 + 0.5 + noise."""
    data = []
    for _ in range(n):
        x0, x1 = rng.uniform(-1, 1), rng.uniform(-1, 1)
        data.append((x0, x1, 3.0 * x0 - 2.0 * x1 + 0.5 + rng.gauss(0.0, 0.1)))
    return data


def train_epoch(w, data, batch_size, lr, rng):
    """One pass over the data in shuffled mini-batches; returns the mean squared error."""
    rng.shuffle(data)
    total = 0.0
    for start in range(0, len(data), batch_size):
        batch = data[start:start + batch_size]
        g0 = g1 = gb = 0.0
        for x0, x1, y in batch:
            err = w[0] * x0 + w[1] * x1 + w[2] - y
            g0 += err * x0
            g1 += err * x1
            gb += err
            total += err * err
        scale = lr / len(batch)
        w[0] -= scale * g0
        w[1] -= scale * g1
        w[2] -= scale * gb
        time.sleep(STEP_OVERHEAD_S)
    return total / len(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=40000, help="training samples per epoch")
    p.add_argument("--joule", action="store_true", help="measure each epoch with joule.window")
    p.add_argument("--service", help="one recurrence through this batch-size service (joule serve)")
    p.add_argument("--job", default="quickstart", help="the job's name at the service (default quickstart)")
    p.add_argument("--node", help="this node's name for the service (default: its address)")
    p.add_argument("--target-loss", type=float, default=0.0105, help="with --service: the loss that ends the run")
    p.add_argument("--max-epochs", type=int, default=10, help="with --service: give up after this many epochs")
    args = p.parse_args()
    if args.service:
        return recurrence(args)

    rng = random.Random(1)
    data = make_data(args.samples, rng)
    w = [0.0, 0.0, 0.0]
    lr = 0.05 * args.batch_size ** 0.5 / 32 ** 0.5
    if args.joule:
        import joule
    for epoch in range(1, args.epochs + 1):
        if args.joule:
            with joule.window("epoch") as window:
                loss = train_epoch(w, data, args.batch_size, lr, rng)
            print(f"epoch {epoch}: loss {loss:.4f}, {window.energy_j:.1f} J in {window.elapsed_s:.2f} s "
                  f"({window.average_power_w:.0f} W)", flush=True)
        else:
            loss = train_epoch(w, data, args.batch_size, lr, rng)
            print(f"epoch {epoch}: loss {loss:.4f}", flush=True)
    print(f"model: y = {w[0]:.2f} x0 {w[1]:+.2f} x1 {w[2]:+.2f}")
    report = os.environ.get("JOULE_REPORT_FILE")
    if report:
        with open(report, "a", encoding="utf-8") as f:
            steps = -(-args.samples // args.batch_size) * args.epochs
            f.write(f"samples={args.samples * args.epochs} steps={steps} epochs={args.epochs}\n")


def recurrence(args):
    """One run of the recurring job: the service picks the batch size."""
    import joule

    client = joule.BatchSizeClient(args.service)
    client.register_job(args.job, [16, 32, 64, 128, 256, 512], 32, max_power_w=700.0, eta=0.5)  # False: already there
    a = client.ask(args.job, node=args.node)
    rng = random.Random(a.recurrence_id)
    data = make_data(args.samples, rng)
    w = [0.0, 0.0, 0.0]
    lr = 0.05 * a.batch_size ** 0.5 / 32 ** 0.5
    reached = False
    with joule.window("run") as window:
        for epoch in range(1, args.max_epochs + 1):
            if train_epoch(w, data, a.batch_size, lr, rng) <= args.target_loss:
                reached = True
                break
    cost = client.report(a.recurrence_id, window.energy_j, window.elapsed_s, reached_target=reached)
    where = args.node or "this node"
    if window.monitor is not None and window.monitor.simulated:
        where += " (simulated GPUs)"
    print(f"recurrence {a.recurrence_id} on {where}: batch size {a.batch_size}, "
          f"{epoch} epochs, {window.energy_j:.0f} J in {window.elapsed_s:.2f} s, "
          f"{'reached' if reached else 'missed'} the target, cost {cost:.0f}", flush=True)


if __name__ == "__main__":
    main()
