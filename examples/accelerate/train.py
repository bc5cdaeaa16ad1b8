#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""An Accelerate training loop measured with joule.window: a stack of Transformer blocks on random tokens.

    PYTHONPATH=build/python python3 examples/accelerate/train.py --seconds 30 --out-dir /tmp/accelerate-run

A plain loop (Accelerate's, here) needs three lines of joule:

    import joule
    with joule.window("train") as w:                # measures every GPU this process uses
        ... accelerator.log({"joule/energy_j": w.energy_so_far_j}, step=step)   # running estimate

`w.energy_so_far_j` is a running estimate while the window is open; after
the `with` block the window holds the settled figures. Logged through
`accelerator.log` they reach whatever `log_with` names (TensorBoard here:
OUT_DIR/accelerate). joule only observes: it never changes a power limit or a
clock. --no-joule runs the same loop without it.

bf16 on one GPU, or tiny on the CPU as a smoke test. At the end it prints
what joule measured and writes OUT_DIR/example_result.json (read by
bench/gpu_frameworks.sh).
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

NAME = "examples/accelerate/train.py"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from example_support import StepGate, add_joule_flags, joule_carbon, print_result, require  # noqa: E402  (the examples' shared plumbing)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default 300 on a GPU, 4 on the CPU)")
    p.add_argument("--seconds", type=float, default=None, help="train for this long instead (stops after the step that passes it)")
    p.add_argument("--out-dir", default="accelerate-run", help="TensorBoard logs, joule's summary, example_result.json")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per step (default 32; 4 on the CPU)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 256; 16 on the CPU)")
    p.add_argument("--size", choices=["auto", "tiny", "small"], default="auto",
                   help="model size: small (6 blocks, 1024 wide) on a GPU, tiny (2 blocks, 64 wide) on the CPU")
    p.add_argument("--log-every", type=int, default=10, help="steps between accelerator.log calls")
    p.add_argument("--no-tensorboard", action="store_true", help="log_with none")
    add_joule_flags(p)
    return p.parse_args(argv)


def main():
    args = parse_args()
    require(NAME, [("torch", "torch (python3 -m pip install torch)"),
             ("accelerate", "accelerate (python3 -m pip install 'accelerate>=1.0')")]
            + ([] if args.no_joule else [("joule", "joule's Python module (build joule, then PYTHONPATH=build/python; see README.md)")])
            + ([] if args.no_tensorboard else [("tensorboard", "tensorboard for log_with='tensorboard' (python3 -m pip install tensorboard, or pass --no-tensorboard)")]))

    import accelerate
    import torch
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    tiny = args.size == "tiny" or (args.size == "auto" and not cuda)
    batch = args.batch_size or (4 if tiny else 32)
    seq = args.seq_len or (16 if tiny else 256)
    width, blocks, vocab = (64, 2, 512) if tiny else (1024, 6, 8192)
    steps = args.steps or (10**9 if args.seconds else (4 if tiny else 300))
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)

    accelerator = Accelerator(mixed_precision="bf16" if cuda else "no", cpu=not cuda,
                              log_with=None if args.no_tensorboard else "tensorboard", project_dir=out_dir)
    if not args.no_tensorboard:
        accelerator.init_trackers("accelerate")

    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            layer = torch.nn.TransformerEncoderLayer(width, nhead=max(1, width // 64), dim_feedforward=4 * width,
                                                     batch_first=True, norm_first=True, dropout=0.0)
            self.blocks = torch.nn.TransformerEncoder(layer, blocks, enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, ids):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
            return self.head(self.blocks(self.embed(ids), mask=mask))

    model = Model()
    tokens = torch.randint(0, vocab, (64 * batch, seq + 1))  # a pool of random sequences, cycled
    loader = torch.utils.data.DataLoader(tokens, batch_size=batch, shuffle=True, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    window = contextlib.nullcontext()
    if not args.no_joule:
        import joule                                                     # joule, line 1

        monitor = None  # joule's default: every GPU this process uses; the window's edges wait for CUDA
        if args.joule_sync:
            import joule.meter

            monitor = joule.meter.make_monitor(synchronize=True)
        window = joule.window("train", monitor, carbon=joule_carbon(joule, args, NAME))  # joule, line 2: `with window as w`

    step, step_ends = 0, []
    gate = StepGate(args.joule_ab, null=args.joule_ab_null) if args.joule_ab and not args.no_joule else None
    sync()
    begin = time.monotonic()
    with window as w:
        while step < steps:
            for ids in loader:
                if gate is not None:
                    gate.begin_step()
                logits = model(ids[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                now = time.monotonic()
                step_ends.append(now)
                if gate is not None:
                    gate.record_step_end()
                if step % args.log_every == 0:
                    logs = {"loss": loss.item()}
                    if w is not None and (gate is None or gate.runs_hooks):
                        logs["joule/energy_so_far_j"] = (w.energy_so_far_j if gate is None  # joule, line 3: the running estimate
                                                         else gate.timed(lambda: w.energy_so_far_j))
                    accelerator.log(logs, step=step)
                if step >= steps or (args.seconds and now - begin >= args.seconds):
                    steps = step
                    break
        sync()
        end = time.monotonic()
    joule_figures = None
    if w is not None:
        # After the block: settled figures (waits, once, for the data covering the end).
        w.samples, w.tokens = step * batch, step * batch * seq
        joule_figures = w.metrics()       # joule/train_energy_j, _time_s, _power_w, _energy_per_sample_j, ...
        accelerator.log(joule_figures, step=step)
    if not args.no_tensorboard:
        accelerator.end_training()

    periods = [b - a for a, b in zip(step_ends, step_ends[1:])]
    warm = periods[min(10, len(periods) // 5):]
    result = {
        "example": "accelerate",
        "joule": not args.no_joule,
        "joule_sync": not args.no_joule and args.joule_sync,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "accelerate": accelerate.__version__,
        "model": f"{blocks} Transformer blocks x {width}, vocab {vocab}, "
                 f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters",
        "batch_size": batch,
        "seq_len": seq,
        "steps": step,
        "samples": step * batch,
        "tokens": step * batch * seq,
        "train_begin_monotonic_s": begin,
        "train_end_monotonic_s": end,
        "train_s": end - begin,
        "step_period_median_s": statistics.median(warm) if warm else None,
        "step_period_mean_s": statistics.fmean(warm) if warm else None,
        "step_periods_s": periods,
        "joule_ab_block": args.joule_ab if gate is not None else None,
        "step_joule_on": gate.states if gate is not None else None,
        "step_joule_hook_s": gate.hook_s if gate is not None else None,
        "tensorboard_dir": None if args.no_tensorboard else os.path.join(out_dir, "accelerate"),
    }
    if w is not None:
        result["joule_summary"] = joule_summary(w, joule_figures)
    with open(os.path.join(out_dir, "example_result.json"), "w") as f:
        json.dump(result, f, indent=2)
    print_result(result)


def joule_summary(w, figures):
    """The window's settled figures under the names joule.hf's summary uses, and
    its span on time.monotonic()'s clock (for bench/gpu_frameworks.py, which
    lines it up with `joule measure`)."""
    m = w.measurement
    p = f"joule/{w.name}_"
    summary = {"energy_j": w.energy_j, "time_s": m.elapsed_s, "average_power_w": w.average_power_w,
               "energy_per_sample_j": figures.get(p + "energy_per_sample_j"),
               "energy_per_token_j": figures.get(p + "energy_per_token_j"),
               "co2e_g": figures.get(p + "co2e_g"), "cost": figures.get(p + "cost"),
               "settled": m.settled, "metrics": figures}
    offset = time.monotonic() - w.monitor.clock_s()
    summary["window_monotonic_s"] = [m.begin_s + offset, m.begin_s + m.elapsed_s + offset]
    return summary


if __name__ == "__main__":
    main()
