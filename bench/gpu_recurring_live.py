#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Live recurrences of the recurring job of examples/recurring/ on one GPU,
read-only, their batch sizes chosen by a real `joule serve` (SQLite store):

    OUT/live-eta<ETA>.jsonl      one line per recurrence: train.py's result
                                 (batch size, reached or stopped, time, energy,
                                 cost, the observer-mode power profile) and the
                                 energy the NVML counter read over the run
    OUT/jobs.db                  the service's store (resumes the next call)
    OUT/counter-eta<ETA>.txt     the counter reads (monotonic s, mJ) at its steps

Each recurrence is one `train.py --service URL --job J` run in this process
(torch and the data once per recurrence, as the user's job would have them),
seed = recurrence number, so every recurrence trains from its own
initialisation and data order. A budget keeps the call inside its device
time; the next call with the same OUT (store and results carried back)
resumes where it stopped.

The reference: a second process reads the GPU's energy counter every
READ_INTERVAL_S and keeps the instants at which it steps (every 100 ms on an
H100/H200); the energy over a run's window (its edges on time.monotonic()'s
clock) is read off the steps by linear interpolation between them.

    bash bench/gpu_install.sh dist /tmp/joule-venv
    /tmp/joule-venv/bin/python bench/gpu_recurring_live.py --serve BIN/joule --data-dir D --out OUT --eta 0.5
"""
import argparse
import bisect
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "recurring", "train.py")
READ_INTERVAL_S = 0.005

COUNTER_READER = r"""
import sys, time, pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
out = open(sys.argv[2], "a", buffering=1)
previous, previous_t = None, None
while True:
    t0 = time.monotonic()
    value = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    t = 0.5 * (t0 + time.monotonic())
    if previous is not None and value != previous:
        # the step fell between the last read and this one: its middle
        out.write(f"{0.5 * (previous_t + t):.6f} {value}\n")
    previous, previous_t = value, t
    time.sleep(float(sys.argv[3]))
"""


class CounterSteps:
    """The counter's steps as a file of (monotonic s, mJ) lines."""

    def __init__(self, path):
        self.path = path

    def energy_j(self, begin_s, end_s):
        times, values = [], []
        with open(self.path) as f:
            for line in f:
                t, v = line.split()
                times.append(float(t))
                values.append(int(v))

        def at(t):
            i = bisect.bisect_right(times, t)
            if i == 0 or i == len(times):
                return float("nan")
            return values[i - 1] + (values[i] - values[i - 1]) * (t - times[i - 1]) / (times[i] - times[i - 1])

        return (at(end_s) - at(begin_s)) / 1000.0


def load_example():
    spec = importlib.util.spec_from_file_location("recurring_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_service(serve_bin, out):
    port_file = os.path.join(out, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    log = open(os.path.join(out, "serve.log"), "a")
    service = subprocess.Popen([serve_bin, "serve", "--store", f"sqlite:{os.path.join(out, 'jobs.db')}",
                                "--listen", "127.0.0.1:0", "--port-file", port_file, "--quiet"],
                               stdout=log, stderr=log)
    for _ in range(100):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return service, f"http://127.0.0.1:{open(port_file).read().strip()}"
        if service.poll() is not None:
            raise SystemExit(f"joule serve exited with {service.returncode}: see {out}/serve.log")
        time.sleep(0.1)
    service.kill()
    raise SystemExit("joule serve did not write its port in 10 s")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--serve", required=True, help="a joule program with the service (joule serve)")
    p.add_argument("--out", required=True)
    p.add_argument("--eta", type=float, default=0.5)
    p.add_argument("--recurrences", type=int, default=30)
    p.add_argument("--target", type=float, default=0.925)
    p.add_argument("--max-epochs", type=int, default=60)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--budget-s", type=float, default=0, help="start no recurrence after this long (0: no limit)")
    p.add_argument("--gpu", type=int, default=0)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    job = f"fashion-mnist-eta{args.eta:g}"
    results_path = os.path.join(args.out, f"live-eta{args.eta:g}.jsonl")
    done = sum(1 for _ in open(results_path)) if os.path.exists(results_path) else 0
    if done >= args.recurrences:
        print(f"{job}: {done} recurrences already in {results_path}")
        return 0
    example = load_example()
    counter_path = os.path.join(args.out, f"counter-eta{args.eta:g}.txt")
    reader = subprocess.Popen([sys.executable, "-c", COUNTER_READER, str(args.gpu), counter_path, str(READ_INTERVAL_S)])
    service, url = start_service(args.serve, args.out)
    started = time.monotonic()
    try:
        time.sleep(1.0)  # a few counter steps before the first run begins
        for recurrence in range(done + 1, args.recurrences + 1):
            if args.budget_s and time.monotonic() - started > args.budget_s:
                print(f"budget of {args.budget_s} s spent after recurrence {recurrence - 1}; resume with the same --out")
                break
            run_args = example.parse_args([
                "--service", url, "--job", job, "--eta", str(args.eta), "--seed", str(recurrence),
                "--target", str(args.target), "--max-epochs", str(args.max_epochs), "--data-dir", args.data_dir,
                "--power-limit", "observe"])
            result = example.run(run_args)
            time.sleep(0.3)  # the counter's next steps after the run's end
            window = result["window"]
            result["recurrence"] = recurrence
            result["counter_energy_j"] = CounterSteps(counter_path).energy_j(
                window["begin_monotonic_s"], window["begin_monotonic_s"] + window["elapsed_s"])
            with open(results_path, "a") as f:
                f.write(json.dumps(result) + "\n")
            gpu_j = sum(window["gpu_energy_j"])
            print(f"{job} #{recurrence:2d}: bs {result['batch_size']:5d} "
                  f"{'reached' if result['reached'] else 'STOPPED' if result['stopped_by_service'] else 'NOT reached'} "
                  f"after {result['epochs']:2d} epochs, {result['time_s']:5.1f} s, {gpu_j:6.0f} J "
                  f"(counter {result['counter_energy_j']:6.0f} J, {100 * (gpu_j / result['counter_energy_j'] - 1):+.2f}%), "
                  f"cost {result['cost']:7.0f}", flush=True)
    finally:
        service.terminate()
        service.wait(timeout=10)
        reader.terminate()
        reader.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
