#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A Hugging Face Trainer run with joule's energy callback: a small GPT-style model on random tokens.

    PYTHONPATH=build/python python3 examples/hf_trainer/train.py --seconds 30 --out-dir /tmp/hf-run

The model is built from transformers' GPT2Config (no download: random weights,
random token ids), trained with bf16 on one GPU (or tiny and slow on the CPU,
as a smoke test). joule's integration is the one line

    trainer = Trainer(..., callbacks=[joule.hf.EnergyCallback(...)])

which measures the run, logs energy, average power and energy per sample and
per token through the Trainer's own logging (here report_to="tensorboard":
the series land in OUT_DIR/tensorboard) and writes a summary JSON into the
Trainer's output_dir. joule only observes: it never changes a power limit or
a clock. --no-joule runs the same training without it (for the overhead).

At the end it prints what joule measured and writes OUT_DIR/example_result.json
(joule's figures, the training span and the step times; bench/gpu_frameworks.sh
reads it).
"""
import argparse
import json
import os
import statistics
import sys
import time

NAME = "examples/hf_trainer/train.py"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from example_support import StepGate, add_joule_flags, callback_summary, joule_carbon, joule_monitor, print_result, require  # noqa: E402  (the examples' shared plumbing)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default 300 on a GPU, 4 on the CPU)")
    p.add_argument("--seconds", type=float, default=None, help="train for this long instead (stops after the step that passes it)")
    p.add_argument("--out-dir", default="hf-trainer-run", help="Trainer output_dir: joule's summary, TensorBoard logs, example_result.json")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per step (default 16; 2 on the CPU)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 512; 32 on the CPU)")
    p.add_argument("--logging-steps", type=int, default=10, help="Trainer logging_steps (joule's figures ride on these logs)")
    p.add_argument("--size", choices=["auto", "tiny", "small"], default="auto",
                   help="model size: small (6 layers, 768 wide) on a GPU, tiny (2 layers, 64 wide) on the CPU")
    p.add_argument("--no-tensorboard", action="store_true", help="report_to none")
    add_joule_flags(p)
    return p.parse_args(argv)


def main():
    args = parse_args()
    require(NAME, [("torch", "torch (python3 -m pip install torch)"),
             ("transformers", "transformers (python3 -m pip install 'transformers>=5')")]
            + ([] if args.no_joule else [("joule", "joule's Python module (build joule, then PYTHONPATH=build/python; see README.md)")])
            + ([] if args.no_tensorboard else [("tensorboard", "tensorboard for report_to='tensorboard' (python3 -m pip install tensorboard, or pass --no-tensorboard)")]))

    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    cuda = torch.cuda.is_available()
    tiny = args.size == "tiny" or (args.size == "auto" and not cuda)
    batch = args.batch_size or (2 if tiny else 16)
    seq = args.seq_len or (32 if tiny else 512)
    steps = args.steps or (10**9 if args.seconds else (4 if tiny else 300))
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    # transformers 5 takes TensorBoard's directory from this variable (else logging_dir).
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", os.path.join(out_dir, "tensorboard"))

    torch.manual_seed(0)
    if tiny:
        config = GPT2Config(vocab_size=512, n_positions=seq, n_embd=64, n_layer=2, n_head=4)
    else:
        config = GPT2Config(vocab_size=8192, n_positions=seq, n_embd=768, n_layer=6, n_head=12)
    model = GPT2LMHeadModel(config)

    class RandomTokens(torch.utils.data.Dataset):
        """Random token ids, the same for an index every time (no download)."""

        def __len__(self):  # 256 steps an epoch; the Trainer goes round again until max_steps
            return 256 * batch

        def __getitem__(self, i):
            ids = torch.randint(0, config.vocab_size, (seq,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class StepClock(TrainerCallback):
        """The training span (time.monotonic, synchronised) and each step's period; stops after --seconds."""

        def __init__(self):
            self.begin = self.end = self.tensorboard_dir = None
            self.step_ends = []

        def _sync(self):
            if cuda:
                torch.cuda.synchronize()

        def on_train_begin(self, args_, state, control, **kwargs):
            self._sync()
            self.begin = time.monotonic()
            self.tensorboard_dir = tensorboard_dir(trainer)  # open now (closed at the end)

        def on_step_end(self, args_, state, control, **kwargs):
            now = time.monotonic()
            self.step_ends.append(now)
            if gate is not None:
                gate.record_step_end()
            if args.seconds and now - self.begin >= args.seconds:
                control.should_training_stop = True

        def on_train_end(self, args_, state, control, **kwargs):
            self._sync()
            self.end = time.monotonic()

    gate = StepGate(args.joule_ab, null=args.joule_ab_null) if args.joule_ab and not args.no_joule else None
    clock = StepClock()  # times the steps alike with and without joule (joule's callback puts itself first)
    callbacks = [clock]
    energy_callback = None
    if not args.no_joule:
        import joule
        import joule.hf

        carbon = joule_carbon(joule, args, NAME)
        # The integration: one callback. Observer only (no jouled, no limits changed).
        energy_callback = joule.hf.EnergyCallback(monitor=joule_monitor(joule, args), carbon=carbon,
                                                  tokens_per_step=batch * seq)
        callbacks.append(energy_callback)
        if gate is not None:
            gate.wrap(energy_callback, "on_step_begin", ["on_step_end", "on_log"])

    training_args = TrainingArguments(
        output_dir=out_dir,
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=3e-4,
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to="none" if args.no_tensorboard else "tensorboard",
        bf16=cuda,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=RandomTokens(), callbacks=callbacks)
    trainer.train()

    steps_done = len(clock.step_ends)
    periods = [b - a for a, b in zip(clock.step_ends, clock.step_ends[1:])]
    warm = periods[min(10, len(periods) // 5):]
    result = {
        "example": "hf_trainer",
        "joule": not args.no_joule,
        "joule_sync": not args.no_joule and args.joule_sync,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": f"GPT-2 style, {config.n_layer} layers x {config.n_embd}, vocab {config.vocab_size}, "
                 f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters",
        "batch_size": batch,
        "seq_len": seq,
        "steps": steps_done,
        "samples": steps_done * batch,
        "tokens": steps_done * batch * seq,
        "train_begin_monotonic_s": clock.begin,
        "train_end_monotonic_s": clock.end,
        "train_s": clock.end - clock.begin,
        "step_period_median_s": statistics.median(warm) if warm else None,
        "step_period_mean_s": statistics.fmean(warm) if warm else None,
        "step_periods_s": periods,
        "joule_ab_block": args.joule_ab if gate is not None else None,
        "step_joule_on": gate.states if gate is not None else None,
        "step_joule_hook_s": gate.hook_s if gate is not None else None,
        "tensorboard_dir": clock.tensorboard_dir,
    }
    if energy_callback is not None:
        result["joule_summary"] = callback_summary(energy_callback)
    with open(os.path.join(out_dir, "example_result.json"), "w") as f:
        json.dump(result, f, indent=2)
    print_result(result)


def tensorboard_dir(trainer):
    """Where the Trainer's TensorBoard callback wrote (None without one)."""
    for c in trainer.callback_handler.callbacks:
        if type(c).__name__ == "TensorBoardCallback":
            writer = getattr(c, "tb_writer", None)
            return getattr(writer, "log_dir", None) or getattr(writer, "logdir", None) or os.environ.get("TENSORBOARD_LOGGING_DIR")
    return None


if __name__ == "__main__":
    main()
