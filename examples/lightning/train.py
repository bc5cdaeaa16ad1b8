#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A Lightning run with joule's measurement callback: a small CNN on random images.

    PYTHONPATH=build/python python3 examples/lightning/train.py --seconds 30 --out-dir /tmp/lightning-run

joule's integration is one callback beside the loggers:

    trainer = L.Trainer(..., logger=[TensorBoardLogger(...), CSVLogger(...)],
                        callbacks=[joule.lightning.EnergyCallback(...)])

which measures the run and logs energy, average power and energy per sample
to every attached logger (OUT_DIR/tensorboard
and OUT_DIR/csv/.../metrics.csv here). joule only observes: it never changes a
power limit or a clock. --no-joule runs the same training without it.

Random 3x32x32 images and labels (no download), bf16-mixed on one GPU, or a
tiny model on the CPU as a smoke test. At the end it prints what joule
measured and writes OUT_DIR/example_result.json (read by
bench/gpu_frameworks.sh).
"""
import argparse
import json
import os
import statistics
import sys
import time

NAME = "examples/lightning/train.py"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from example_support import StepGate, add_joule_flags, callback_summary, joule_carbon, joule_monitor, print_result, require  # noqa: E402  (the examples' shared plumbing)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default 500 on a GPU, 4 on the CPU)")
    p.add_argument("--seconds", type=float, default=None, help="train for this long instead (stops after the step that passes it)")
    p.add_argument("--out-dir", default="lightning-run", help="logs, joule's summary, example_result.json")
    p.add_argument("--batch-size", type=int, default=None, help="images per step (default 256; 8 on the CPU)")
    p.add_argument("--size", choices=["auto", "tiny", "small"], default="auto",
                   help="model size: small (channels 128-256-512) on a GPU, tiny (8-16-32) on the CPU")
    p.add_argument("--log-every", type=int, default=10, help="Lightning log_every_n_steps")
    p.add_argument("--no-tensorboard", action="store_true", help="CSVLogger only")
    add_joule_flags(p)
    return p.parse_args(argv)


def main():
    args = parse_args()
    require(NAME, [("torch", "torch (python3 -m pip install torch)"),
             ("lightning|pytorch_lightning", "lightning (python3 -m pip install 'lightning>=2.6')")]
            + ([] if args.no_joule else [("joule", "joule's Python module (build joule, then PYTHONPATH=build/python; see README.md)")])
            + ([] if args.no_tensorboard else [("tensorboard", "tensorboard for TensorBoardLogger (python3 -m pip install tensorboard, or pass --no-tensorboard)")]))

    import torch

    try:
        import lightning as L
        from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    except ImportError:  # the older package name
        import pytorch_lightning as L
        from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

    cuda = torch.cuda.is_available()
    tiny = args.size == "tiny" or (args.size == "auto" and not cuda)
    batch = args.batch_size or (8 if tiny else 256)
    steps = args.steps or (-1 if args.seconds else (4 if tiny else 500))
    widths = (8, 16, 32) if tiny else (128, 256, 512)
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)

    torch.manual_seed(0)
    pool = 64 * batch  # a pool of random images, cycled (64 steps an epoch)
    images = torch.randn(pool, 3, 32, 32)
    labels = torch.randint(0, 10, (pool,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=batch,
                                         shuffle=True, drop_last=True, pin_memory=cuda)

    class SmallCnn(L.LightningModule):
        def __init__(self):
            super().__init__()
            layers, c = [], 3
            for w in widths:
                layers += [torch.nn.Conv2d(c, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                           torch.nn.Conv2d(w, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                           torch.nn.MaxPool2d(2)]
                c = w
            self.net = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 10))

        def training_step(self, batch_, _):
            x, y = batch_
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    class StepClock(L.Callback):
        """The training span (time.monotonic, synchronised) and each step's period; stops after --seconds."""

        def __init__(self):
            self.begin = self.end = None
            self.step_ends = []

        def _sync(self):
            if cuda:
                torch.cuda.synchronize()

        def on_train_start(self, trainer, pl_module):
            self._sync()
            self.begin = time.monotonic()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch_, batch_idx):
            now = time.monotonic()
            self.step_ends.append(now)
            if gate is not None:
                gate.record_step_end()
            if args.seconds and now - self.begin >= args.seconds:
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            self._sync()
            self.end = time.monotonic()

    gate = StepGate(args.joule_ab, null=args.joule_ab_null) if args.joule_ab and not args.no_joule else None
    clock = StepClock()  # times the steps alike with and without joule
    callbacks = [clock]
    energy_callback = None
    if not args.no_joule:
        import joule
        import joule.lightning

        # The integration: one callback; it logs to the loggers below. Observer only.
        energy_callback = joule.lightning.EnergyCallback(monitor=joule_monitor(joule, args),
                                                         carbon=joule_carbon(joule, args, NAME))
        callbacks.append(energy_callback)
        if gate is not None:
            gate.wrap(energy_callback, "on_train_batch_start", ["on_train_batch_end"])

    loggers = [CSVLogger(out_dir, name="csv")]
    if not args.no_tensorboard:
        loggers.insert(0, TensorBoardLogger(out_dir, name="tensorboard"))
    trainer = L.Trainer(
        accelerator="gpu" if cuda else "cpu",
        devices=1,
        precision="bf16-mixed" if cuda else "32-true",
        max_steps=steps,
        max_epochs=-1,
        logger=loggers,
        callbacks=callbacks,
        log_every_n_steps=args.log_every,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out_dir,
    )
    model = SmallCnn()
    trainer.fit(model, loader)

    steps_done = len(clock.step_ends)
    periods = [b - a for a, b in zip(clock.step_ends, clock.step_ends[1:])]
    warm = periods[min(10, len(periods) // 5):]
    result = {
        "example": "lightning",
        "joule": not args.no_joule,
        "joule_sync": not args.no_joule and args.joule_sync,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "lightning": L.__version__,
        "model": f"CNN, channels {'-'.join(map(str, widths))}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters",
        "batch_size": batch,
        "steps": steps_done,
        "samples": steps_done * batch,
        "tokens": None,
        "train_begin_monotonic_s": clock.begin,
        "train_end_monotonic_s": clock.end,
        "train_s": clock.end - clock.begin,
        "step_period_median_s": statistics.median(warm) if warm else None,
        "step_period_mean_s": statistics.fmean(warm) if warm else None,
        "step_periods_s": periods,
        "joule_ab_block": args.joule_ab if gate is not None else None,
        "step_joule_on": gate.states if gate is not None else None,
        "step_joule_hook_s": gate.hook_s if gate is not None else None,
        "log_dirs": [lg.log_dir for lg in loggers],
    }
    if energy_callback is not None:
        result["joule_summary"] = callback_summary(energy_callback)
    with open(os.path.join(out_dir, "example_result.json"), "w") as f:
        json.dump(result, f, indent=2)
    print_result(result)


if __name__ == "__main__":
    main()
