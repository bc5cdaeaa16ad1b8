#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A recurring training job: a CNN trained on Fashion-MNIST to a target test accuracy.

    python3 examples/recurring/train.py --batch-size 64                 # one run, to the target
    python3 examples/recurring/train.py --service http://127.0.0.1:8080 --job fmnist   # a recurrence

A recurring job is the same training run again and again (new data, new
hyper-parameters, a nightly retrain), each time to the same target. joule's
batch-size service learns across the recurrences which batch size reaches
the target for the least cost (the Zeus cost, eta * energy + (1 - eta) *
max power * time), and stops a run early once it has cost more than the
threshold the service hands out. With --service this run is one
recurrence: it asks the service for its batch size, trains, tells the
service after each epoch how far it got, stops at the target or when the
service says so, and reports what it reached. Without --service it trains
with --batch-size to the target (the characterisation of docs/optimizer.md,
"A recurring job on a real GPU").

The data: Fashion-MNIST (60,000 + 10,000 28x28 grey images of 10 kinds of
clothing, Zalando, MIT licence), read from its idx files as Debian's
dataset-fashion-mnist package installs them (--data-dir; nothing is
downloaded), put on the GPU once. Each epoch trains on all training images
in a seeded random order and then evaluates on the 10,000 test images; the
evaluation counts in the run's time and energy, as it does for the user.
Adam's learning rate grows with the square root of the batch size (1e-3 at
64), the usual rule for Adam, so every size has a fair chance.

Prints one JSON line (and writes --result-json): batch size, seed, whether
it reached the target, epochs, time, energy, test accuracy per epoch.
--subset N trains on N images and tests on N/5 (a CPU smoke test).
"""
import argparse
import contextlib
import gzip
import json
import math
import os
import struct
import sys
import time

NAME = "examples/recurring/train.py"
DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
# The batch size a user would pick for an MNIST-sized job: PyTorch's own
# MNIST example trains with 64.
DEFAULT_BATCH_SIZE = 64
BASE_LEARNING_RATE = 1e-3  # Adam's at DEFAULT_BATCH_SIZE


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                   help=f"images per step, without --service (default {DEFAULT_BATCH_SIZE})")
    p.add_argument("--target", type=float, default=0.92, help="test accuracy that ends the run (default 0.92)")
    p.add_argument("--max-epochs", type=int, default=60, help="give up after this many epochs (default 60)")
    p.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"the four idx .gz files (default {DEFAULT_DATA_DIR})")
    p.add_argument("--subset", type=int, default=0, help="train on this many images, test on a fifth as many (0: all)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    p.add_argument("--service", default=None, help="a joule serve URL: run as one recurrence of --job there")
    p.add_argument("--job", default="fashion-mnist", help="the job's name on the service")
    p.add_argument("--token", default=None, help="the service's bearer token, if it asks for one")
    p.add_argument("--batch-sizes", default="32,64,128,256,512,1024,2048,4096",
                   help="with --service: the sizes the job may use, given when this run registers it")
    p.add_argument("--eta", type=float, default=0.5,
                   help="with --service: the job's weight of energy against time in its cost, 0-1 (default 0.5)")
    p.add_argument("--power-limit", choices=["none", "observe"], default="none",
                   help="observe: run joule's just-in-time power-limit profiler in observer mode (it measures "
                        "and reports, and changes no GPU setting); its profile is in the result (default none)")
    p.add_argument("--result-json", default=None, help="also write the result here")
    p.add_argument("--no-joule", action="store_true", help="train without joule (no energy figures)")
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error(f"--batch-size {args.batch_size}: give at least 1")
    if not 0.0 < args.target < 1.0:
        p.error(f"--target {args.target}: give a test accuracy between 0 and 1")
    if args.max_epochs < 1:
        p.error(f"--max-epochs {args.max_epochs}: give at least 1")
    if args.subset < 0:
        p.error(f"--subset {args.subset}: give 0 (all) or more")
    try:
        args.batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",")})
    except ValueError:
        p.error(f"--batch-sizes {args.batch_sizes!r}: give sizes separated by commas, e.g. 32,64,128")
    if args.batch_sizes[0] < 1 or DEFAULT_BATCH_SIZE not in args.batch_sizes:
        p.error(f"--batch-sizes: give sizes of at least 1, {DEFAULT_BATCH_SIZE} (the default) among them")
    if not 0.0 <= args.eta <= 1.0:
        p.error(f"--eta {args.eta}: give a weight between 0 and 1")
    if args.no_joule and (args.service or args.power_limit != "none"):
        p.error("--service and --power-limit need joule (they use its energy): leave out --no-joule")
    return args


# ----------------------------------------------------------------- data
def read_idx(path):
    """An idx file (the MNIST format): magic, dimensions, then bytes."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SystemExit(f"{NAME}: cannot read {path}: {e} (install Debian's dataset-fashion-mnist, or give --data-dir)")
    if len(data) < 4:
        raise SystemExit(f"{NAME}: {path}: {len(data)} bytes, too short for an idx file")
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08 or dims not in (1, 3):
        raise SystemExit(f"{NAME}: {path}: not an idx file of unsigned bytes (header {data[:4].hex()})")
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    expected = 4 + 4 * dims + math.prod(shape)
    if len(data) != expected:
        raise SystemExit(f"{NAME}: {path}: {len(data)} bytes where its header {shape} says {expected}")
    return shape, data[4 + 4 * dims:]


def load_split(torch, data_dir, split, limit, device):
    """(images as float N x 1 x 28 x 28, normalised; labels as int64 N) on device."""
    prefix = "train" if split == "train" else "t10k"
    image_shape, images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    label_shape, labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    if image_shape[0] != label_shape[0] or image_shape[1:] != (28, 28):
        raise SystemExit(f"{NAME}: {data_dir}: {split} images {image_shape} and labels {label_shape} do not match")
    n = image_shape[0] if not limit else min(limit, image_shape[0])
    x = torch.frombuffer(bytearray(images[:n * 784]), dtype=torch.uint8).reshape(n, 1, 28, 28)
    y = torch.frombuffer(bytearray(labels[:n]), dtype=torch.uint8).to(torch.int64)
    if int(y.max()) > 9:
        raise SystemExit(f"{NAME}: {data_dir}: a {split} label is {int(y.max())}; Fashion-MNIST has 10 classes")
    x = (x.to(torch.float32) / 255.0 - 0.2860) / 0.3530  # the training set's mean and spread
    return x.to(device), y.to(device)


# ----------------------------------------------------------------- model
def make_model(torch):
    nn = torch.nn
    block = lambda c_in, c_out: [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]  # noqa: E731
    return nn.Sequential(
        *block(1, 32), *block(32, 32), nn.MaxPool2d(2),
        *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.3), nn.Linear(64 * 7 * 7, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, 10))


def train_epoch(torch, model, optimizer, x, y, batch_size, generator, callbacks):
    model.train()
    order = torch.randperm(x.shape[0], generator=generator, device="cpu").to(x.device)
    for start in range(0, x.shape[0], batch_size):
        index = order[start:start + batch_size]
        with callbacks.step():
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x[index]), y[index]).backward()
            optimizer.step()


def accuracy(torch, model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, x.shape[0], 2048):
            correct += int((model(x[start:start + 2048]).argmax(1) == y[start:start + 2048]).sum())
    return correct / x.shape[0]


# ----------------------------------------------------------------- the run
class NoCallbacks:
    """Stands in for joule.torch.TrainingCallbacks when no profiler runs."""

    @contextlib.contextmanager
    def epoch(self):
        yield

    @contextlib.contextmanager
    def step(self):
        yield


# The profiler's settings for a job of seconds, not hours: candidates 100 W
# apart, one pass (its noise-aware rounds would outlast the whole run), and
# visits short enough that two fit in an epoch of 15 steps of ~30 ms (batch
# size 4096 on an H200): the profiler starts a visit afresh after each
# epoch's evaluation, so a visit longer than an epoch never ends.
OBSERVER_PROFILE = dict(observer=True, step_w=100.0, warmup_steps=2, measure_steps=5, min_warmup_s=0.05,
                        min_measure_s=0.15, noise_aware=False)


def make_profiler(joule, monitor, recurrence, batch_size):
    """The just-in-time power-limit optimizer in observer mode: it visits
    every candidate limit in the first epoch(s), but, changing nothing,
    measures each at the GPU's current limit."""
    if recurrence:  # on the recurrence's monitor, with the job's eta; nothing is published from observer mode
        return recurrence.make_power_limit_optimizer(on_profiled=lambda rows: None, **OBSERVER_PROFILE)
    return joule.PowerLimitOptimizer(monitor, job="fashion-mnist", batch_size=batch_size, **OBSERVER_PROFILE)


def profile_summary(profiler):
    if profiler is None:
        return None
    return {"state": profiler.state, "observer": profiler.observer, "chosen_limit_w": profiler.chosen_limit_w,
            "candidate_limits_w": list(profiler.candidate_limits_w), "rows": profiler.profile}


def train_to_target(torch, args, device, batch_size, monitor, recurrence, profiler, train, test):
    """Epochs until the test accuracy reaches the target, the service says
    stop, or --max-epochs; each epoch (training and evaluation) in a window."""
    model = make_model(torch).to(device)
    learning_rate = BASE_LEARNING_RATE * math.sqrt(batch_size / DEFAULT_BATCH_SIZE)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(args.seed)
    callbacks = joule_torch_callbacks(profiler)
    accuracies, epoch_energy_j, epoch_time_s = [], [], []
    reached = stopped = False
    if monitor:
        monitor.begin_window("run")
    started = time.perf_counter()
    for epoch in range(1, args.max_epochs + 1):
        epoch_started = time.perf_counter()
        if monitor:
            monitor.begin_window("epoch")
        with callbacks.epoch():
            train_epoch(torch, model, optimizer, *train, batch_size, generator, callbacks)
        accuracies.append(accuracy(torch, model, *test))  # .item() waits for the GPU
        if monitor:
            epoch_energy_j.append(monitor.end_window("epoch").total_energy_j)
        epoch_time_s.append(time.perf_counter() - epoch_started)
        reached = accuracies[-1] >= args.target
        if reached:
            break
        if recurrence and recurrence.report_progress(epoch):
            stopped = True
            break
    time_s = time.perf_counter() - started
    window = monitor.settle(monitor.end_window("run"), 1.0) if monitor else None
    energy_j = window.total_energy_j if window else None
    return {
        "reached": reached, "stopped_by_service": stopped, "epochs": len(accuracies), "time_s": time_s,
        "energy_j": energy_j, "average_power_w": energy_j / time_s if energy_j is not None else None,
        "learning_rate": learning_rate, "accuracy_per_epoch": accuracies, "epoch_time_s": epoch_time_s,
        "epoch_energy_j": epoch_energy_j or None,
        # The run's window on time.monotonic()'s clock (to hold it against another meter) and whether
        # the data covered its end when it was read.
        "window": {"begin_monotonic_s": window.begin_s + monitor.monotonic_offset_s, "elapsed_s": window.elapsed_s,
                   "gpu_energy_j": window.gpu_energy_j, "settled": window.settled}
        if window and monitor.monotonic_offset_s is not None else None,
    }


def joule_torch_callbacks(profiler):
    if profiler is None:
        return NoCallbacks()
    import joule.torch
    return joule.torch.TrainingCallbacks(profiler)


def register(joule, client, args):
    """The job, as the first recurrence registers it (the same spec again is
    a no-op; another spec under the name is the service's 409). Its maximum
    power is the GPU's highest power limit, as in the Zeus cost."""
    gpus = joule.devices()["gpus"]
    if not gpus:
        raise SystemExit(f"{NAME}: joule sees no GPU to register --job {args.job} with")
    client.register_job(args.job, args.batch_sizes, DEFAULT_BATCH_SIZE, max_power_w=gpus[0]["max_limit_w"],
                        eta=args.eta, target_metric=f"test accuracy >= {args.target}", max_epochs=args.max_epochs,
                        gpu_model=gpus[0]["name"])  # the service's own seed stays its default: each
    # recurrence has a --seed of its own, and a spec that changed with it would be refused


def run(args):
    try:
        import torch
    except ImportError:
        raise SystemExit(f"{NAME}: needs torch (python3 -m pip install torch)")
    joule = None
    if not args.no_joule:
        import joule
        import joule.torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    x_train, y_train = load_split(torch, args.data_dir, "train", args.subset, device)
    x_test, y_test = load_split(torch, args.data_dir, "test", args.subset // 5 if args.subset else 0, device)

    monitor = joule.Monitor(synchronize=joule.torch.synchronizer()) if joule else None
    with contextlib.ExitStack() as stack:
        # A recurrence that raises is not reported: it stays in flight on the
        # service and teaches it nothing (joule.torch.BatchSizeRecurrence).
        recurrence = None
        batch_size = args.batch_size
        if args.service:
            client = joule.BatchSizeClient(args.service, token=args.token)
            register(joule, client, args)
            recurrence = stack.enter_context(joule.torch.BatchSizeRecurrence(client, args.job, monitor=monitor))
            batch_size = recurrence.batch_size
        profiler = make_profiler(joule, monitor, recurrence, batch_size) if args.power_limit == "observe" else None
        trained = train_to_target(torch, args, device, batch_size, monitor, recurrence, profiler,
                                  (x_train, y_train), (x_test, y_test))
        if profiler and not recurrence:
            profiler.restore()  # (the recurrence restores its own at the block's end)
        if recurrence:
            # The run's own window (settled), so the service learns what this run reports.
            recurrence.finish(reached_target=trained["reached"], energy_j=trained["energy_j"],
                              time_s=trained["window"]["elapsed_s"] if trained["window"] else trained["time_s"])
    return {
        "job": args.job if args.service else None, "batch_size": batch_size, "seed": args.seed, "target": args.target,
        **trained, "cost": recurrence.cost if recurrence else None, "profile": profile_summary(profiler),
        "device": device,
        "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
        "train_images": int(x_train.shape[0]), "test_images": int(x_test.shape[0]),
    }


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    line = json.dumps(result)
    print(line, flush=True)
    if args.result_json:
        with open(args.result_json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
