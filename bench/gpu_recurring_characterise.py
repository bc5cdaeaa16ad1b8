#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The recurring job of examples/recurring/ characterised on one GPU,
read-only: every batch size, several seeds each, trained to the target (or
to --max-epochs), at the GPU's current power limit. Writes the runs and the
job as traces in the format `joule simulate` reads (the bundled Zeus traces'
columns: docs/simulation.md):

    OUT/runs.jsonl                  one line per run (examples/recurring/train.py's result)
    OUT/summary_train.csv           per run and metric level: the first epoch that reached it (nan: never)
    OUT/summary_power_<gpu>.csv     per batch size at the current limit: time per epoch, average power

All runs share one process (the data is loaded and put on the GPU once per
run, torch once), in the order seed-major, sizes shuffled per seed, so a
drift of the machine over the session does not fall on one size.

    bash bench/gpu_install.sh dist /tmp/joule-venv     # on the GPU machine (carry dist/ and the dataset)
    /tmp/joule-venv/bin/python bench/gpu_recurring_characterise.py --data-dir fashion-mnist --out OUT
"""
import argparse
import csv
import importlib.util
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "recurring", "train.py")
DATASET, NETWORK, OPTIMIZER = "fashion-mnist", "cnn", "adam"
# Metric levels of the train trace: test accuracies from easy to the target.
LEVELS = [0.80, 0.82, 0.84, 0.86, 0.88, 0.89, 0.90, 0.905, 0.91, 0.915, 0.92, 0.925, 0.93]


def load_example():
    spec = importlib.util.spec_from_file_location("recurring_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--batch-sizes", default="32,64,128,256,512,1024,2048,4096")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--target", type=float, default=0.92)
    p.add_argument("--max-epochs", type=int, default=60)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting runs after this long (0: no limit)")
    p.add_argument("--power-limit", choices=["none", "observe"], default="none",
                   help="observe: each run with the just-in-time profiler in observer mode (train.py --power-limit)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    example = load_example()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    runs_path = os.path.join(args.out, "runs.jsonl")
    done = set()
    if os.path.exists(runs_path):  # resume: a session of GPU time may end mid-way
        for line in open(runs_path):
            r = json.loads(line)
            done.add((r["batch_size"], r["seed"]))
    started = time.monotonic()
    for seed in seeds:
        order = list(sizes)
        random.Random(seed).shuffle(order)
        for size in order:
            if (size, seed) in done:
                continue
            if args.budget_s and time.monotonic() - started > args.budget_s:
                print(f"budget of {args.budget_s} s spent; resume with the same --out", flush=True)
                return write_traces(args, runs_path)
            run_args = example.parse_args(["--batch-size", str(size), "--seed", str(seed), "--target", str(args.target),
                                           "--max-epochs", str(args.max_epochs), "--data-dir", args.data_dir,
                                           "--batch-sizes", ",".join(map(str, sorted(set(sizes) | {64}))),
                                           "--power-limit", args.power_limit])
            result = example.run(run_args)
            with open(runs_path, "a") as f:
                f.write(json.dumps(result) + "\n")
            print(f"bs {size:5d} seed {seed}: {'reached' if result['reached'] else 'NOT reached'} "
                  f"{result['accuracy_per_epoch'][-1]:.4f} after {result['epochs']} epochs, {result['time_s']:.1f} s, "
                  f"{result['energy_j']:.0f} J, {result['average_power_w']:.0f} W", flush=True)
    return write_traces(args, runs_path)


def write_traces(args, runs_path):
    runs = [json.loads(line) for line in open(runs_path)]
    if not runs:
        return 1
    gpu = runs[0]["gpu"] or "cpu"
    gpu_tag = gpu.lower().replace("nvidia ", "").split()[0]
    with open(os.path.join(args.out, "summary_train.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric", "target_epoch"])
        for r in sorted(runs, key=lambda r: (r["batch_size"], r["seed"])):
            for level in LEVELS:
                epoch = next((i + 1 for i, a in enumerate(r["accuracy_per_epoch"]) if a >= level), None)
                w.writerow([DATASET, NETWORK, r["batch_size"], OPTIMIZER, f"{r['learning_rate']:.6g}", r["seed"], level,
                            epoch if epoch is not None else "nan"])
    # One power limit: the GPU's current one (observer mode: joule changes none on shared GPUs).
    limit_w = current_limit_w()
    with open(os.path.join(args.out, f"summary_power_{gpu_tag}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"])
        for size in sorted({r["batch_size"] for r in runs}):
            mine = [r for r in runs if r["batch_size"] == size]
            epoch_time = statistics.mean(t for r in mine for t in r["epoch_time_s"])
            power = sum(r["energy_j"] for r in mine) / sum(r["time_s"] for r in mine)
            w.writerow([DATASET, NETWORK, size, OPTIMIZER, limit_w, f"{epoch_time:.6g}", f"{power:.6g}"])
    print(f"traces in {args.out} ({len(runs)} runs)")
    return 0


def current_limit_w():
    import joule
    gpus = joule.devices()["gpus"]
    return int(round(gpus[0]["power_limit_w"])) if gpus else 0


if __name__ == "__main__":
    sys.exit(main())
