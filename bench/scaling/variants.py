#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The scaling study's sweep files for one variant, and how long each should take (issue 36).

The four files in docs/examples/scaling/ are the full study (GPU counts 1, 2, 4, 8; 3 repeats). A
sweep file has no overrides on joule's command line, so the other variants are written from them
by changing only `repeats`, `grid.gpus`, `--steps`/`--warmup-steps` (and, for the CPU proof, the
batch values and the model's size): the files written are kept with the results.

  python3 bench/scaling/variants.py write --variant reduced --gpus 1,2,4 --out OUT_DIR
  python3 bench/scaling/variants.py estimate --variant full --gpus 1,2,4,8

Variants:
  full     3 repeats, the files' step counts (the issue's study);
  reduced  2 repeats, half the steps (for a short device budget; same grids);
  cpu      1 repeat, 2 steps, tiny models on the CPU with Gloo (the local proof; no GPU).
The estimate is runs x (start-up + steps x time per step), from the assumptions below (H100 SXM,
bf16, torch 2.x eager; measured figures in bench/README.md sections 15-16 and the ResNet-18
example of docs/characterisation.md): a device estimate, to be corrected by the first sweep's own
(`joule sweep --dry-run` on a store with runs prints the time left from the runs so far).
"""
import argparse
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "docs", "examples", "scaling")
SWEEPS = ["resnet50_weak", "resnet50_strong", "gpt_weak", "gpt_strong"]

# Assumptions of the estimate (seconds).
STARTUP_S = 15.0  # torchrun, import torch, NCCL, model build: 12-17 s in the ResNet-18 example
DDP_FACTOR = 1.10  # a step on N > 1 GPUs against one GPU (gradient all-reduce not fully hidden)
RESNET50_S_PER_IMAGE = 1 / 3500  # per GPU: ~30 ms per step of 128 on an H200 (bench/README.md 15)
RESNET50_S_PER_STEP = 0.003  # launch overhead per step, felt at small local batches
GPT_S_PER_TOKEN = 1 / 200_000  # per GPU, 12 x 768 at 1024 tokens
GPT_S_PER_STEP = 0.004
GPT_TOKENS = 1024
COMMAND_SWEEP_S = 460  # what run_scaling.sh's default --deadline-s 520 leaves the sweeps of one command
CPU_STARTUP_S = 4.0  # the CPU proof: importing torch on two cores; its training is ~0.5 s

VARIANTS = {
    "full": {"repeats": 3, "steps_factor": 1.0},
    "reduced": {"repeats": 2, "steps_factor": 0.5},
    "cpu": {"repeats": 1, "steps": 2, "warmup_steps": 1},
}
# The CPU proof: batches a laptop trains in a second, models shrunk by ddp_train.py's own options.
CPU_BATCHES = {"batch_size": "[2, 4]", "global_batch": "[4, 8]"}
CPU_MODEL_ARGS = {"resnet50": "--device cpu --image-size 32", "gpt": "--device cpu --layers 2 --width 64 --heads 4 "
                  "--seq-len 64 --vocab 512"}


def read_sweep(name):
    with open(os.path.join(EXAMPLES, name + ".toml")) as f:
        return f.read()


def field(text, pattern, what):
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        sys.exit(f"variants.py: no {what} in the sweep file")
    return match


def variant_text(name, variant, gpus):
    """The sweep file `name` for `variant` on GPU counts `gpus` (a list of ints)."""
    spec = VARIANTS[variant]
    text = read_sweep(name)
    steps = int(field(text, r"--steps (\d+)", "--steps").group(1))
    warmup = int(field(text, r"--warmup-steps (\d+)", "--warmup-steps").group(1))
    if "steps" in spec:
        steps, warmup = spec["steps"], spec["warmup_steps"]
    else:
        steps = max(1, round(steps * spec["steps_factor"]))
        warmup = min(steps - 1, round(warmup * spec["steps_factor"]))
    text = re.sub(r"--steps \d+", f"--steps {steps}", text)
    text = re.sub(r"--warmup-steps \d+", f"--warmup-steps {warmup}", text)
    field(text, r"^repeats = \d+$", "repeats")
    text = re.sub(r"^repeats = \d+$", f"repeats = {spec['repeats']}", text, flags=re.MULTILINE)
    field(text, r"^gpus = \[.*\]$", "grid.gpus")
    text = re.sub(r"^gpus = \[.*\]$", "gpus = [" + ", ".join(map(str, gpus)) + "]", text, flags=re.MULTILINE)
    if variant == "cpu":
        model = "gpt" if name.startswith("gpt") else "resnet50"
        text = text.replace(f"--model {model}", f"--model {model} {CPU_MODEL_ARGS[model]}")
        for key, values in CPU_BATCHES.items():
            text = re.sub(rf"^{key} = \[.*\]$", f"{key} = {values}", text, flags=re.MULTILINE)
    if variant != "full":
        text = text.replace("\ncommand =", f"\n# Written by bench/scaling/variants.py: variant {variant}, gpus "
                            f"{','.join(map(str, gpus))}.\ncommand =", 1)
    return text


def grid_of(text):
    """(command, repeats, {key: [values]}) of a sweep file as variant_text writes them."""
    command = field(text, r'^command = "(.*)"$', "command").group(1)
    repeats = int(field(text, r"^repeats = (\d+)$", "repeats").group(1))
    grid = {}
    for key, values in re.findall(r"^(\w+) = \[(.*)\]$", text, re.MULTILINE):
        grid[key] = [int(v) for v in values.split(",")]
    return command, repeats, grid


def train_s(name, command, value, gpus):
    """Estimated seconds of training of one run: `value` is batch_size or global_batch."""
    steps = int(re.search(r"--steps (\d+)", command).group(1))
    local = value if "--batch-size" in command else value / gpus
    if name.startswith("gpt"):
        step = GPT_S_PER_STEP + local * GPT_TOKENS * GPT_S_PER_TOKEN
    else:
        step = RESNET50_S_PER_STEP + local * RESNET50_S_PER_IMAGE
    return steps * step * (DDP_FACTOR if gpus > 1 else 1.0)


def estimate(name, text, variant):
    """(runs, seconds) of one sweep file."""
    command, repeats, grid = grid_of(text)
    startup_s = CPU_STARTUP_S if variant == "cpu" else STARTUP_S
    key = "batch_size" if "batch_size" in grid else "global_batch"
    runs, seconds = 0, 0.0
    for value in grid[key]:
        for gpus in grid["gpus"]:
            runs += repeats
            train = 0.0 if variant == "cpu" else train_s(name, command, value, gpus)
            seconds += repeats * (startup_s + train)
    return runs, seconds


def parse_gpus(text):
    gpus = [int(g) for g in text.split(",") if g.strip()]
    if not gpus or any(g < 1 for g in gpus):
        sys.exit(f"variants.py: --gpus wants GPU counts like 1,2,4,8, not '{text}'")
    return gpus


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["write", "estimate"])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="full")
    parser.add_argument("--gpus", default="1,2,4,8", help="GPU counts of the grid, e.g. 1,2,4")
    parser.add_argument("--only", default=",".join(SWEEPS), help="sweeps, comma-separated (default all four)")
    parser.add_argument("--out", help="folder for the sweep files (write)")
    args = parser.parse_args()
    gpus = parse_gpus(args.gpus)
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in SWEEPS:
            sys.exit(f"variants.py: no sweep '{n}' (there are {', '.join(SWEEPS)})")
    if args.action == "write":
        if not args.out:
            sys.exit("variants.py: write needs --out")
        os.makedirs(args.out, exist_ok=True)
    total_runs, total_s = 0, 0.0
    startup_s = CPU_STARTUP_S if args.variant == "cpu" else STARTUP_S
    print(f"variant {args.variant}, gpus {','.join(map(str, gpus))}: estimated time "
          f"(start-up {startup_s:.0f} s a run)")
    for name in names:
        text = variant_text(name, args.variant, gpus)
        if args.action == "write":
            with open(os.path.join(args.out, name + ".toml"), "w") as f:
                f.write(text)
        runs, seconds = estimate(name, text, args.variant)
        total_runs, total_s = total_runs + runs, total_s + seconds
        print(f"  {name:16} {runs:3d} runs  ~{seconds / 60:5.1f} min")
    print(f"  {'total':16} {total_runs:3d} runs  ~{total_s / 60:5.1f} min "
          f"(>= {math.ceil(total_s / COMMAND_SWEEP_S)} commands of run_scaling.sh's default deadline)")


if __name__ == "__main__":
    main()
