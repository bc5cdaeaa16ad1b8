# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face Trainer: energy of every step, epoch, evaluation and save.

    import joule.hf
    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[joule.hf.EnergyCallback()])
    trainer.train()        # logs joule/* with the loss; writes output_dir/joule_energy.json

Phases laid end to end (train_step, eval, save, other: data loading,
logging, the gaps; spans of the monitor's clock, two clock reads a step),
each epoch and the whole run (windows), on the process-wide
joule.meter.default_monitor() (or monitor=). Each settles lazily
(no step waits for the driver's data); at every Trainer log the windows
settled since the previous log are added to that log as joule/* metrics, so
they reach whatever report_to names (TensorBoard, W&B, MLflow, ...) and
trainer.state.log_history... through the Trainer's own on_log: the callback
moves itself first in the Trainer's callback list so that the reporting
callbacks see the keys. docs/integrations.md lists the names.

Needs transformers (TrainerCallback); joule does not depend on it.
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

from ._run import EVAL, SAVE, SUMMARY_FILE, EnergyRun, RunCallback, unavailable_callback

try:
    from transformers import TrainerCallback as _Base
except ImportError:  # pragma: no cover - exercised without transformers
    _Base = None

__all__ = ["EnergyCallback"]

if _Base is None:
    EnergyCallback = unavailable_callback("joule.hf.EnergyCallback", "pip install transformers")

else:

    class EnergyCallback(RunCallback, _Base):  # type: ignore[no-redef,valid-type,misc]
        """A transformers TrainerCallback measuring the run's energy.

        monitor: a joule.Monitor (default: joule.meter.default_monitor(),
        whose GPUs each count once in a torchrun/Accelerate job). carbon: an
        object with .footprint(energy_j) (e.g. joule.Carbon(region=...)):
        joule/co2e_g and joule/cost are logged and the summary has them.
        trackers: extra joule.trackers targets (SummaryWriter, mlflow, a
        wandb run) fed on the world's rank 0 besides the Trainer's own
        logging. prefix: of the logged keys. summary_file: written in
        args.output_dir by the world's rank 0 (None: none).
        power_limit: None (default: GPU settings never change), "observe"
        (the just-in-time optimizer profiles and reports without changing
        anything), "optimize" (applies its choice where root or jouled allow,
        else observes) or a joule.PowerLimitOptimizer. recurrence: a
        joule.torch.BatchSizeRecurrence (entered, on the same monitor): its
        optimizer is used and its progress reported each epoch (the service
        saying stop ends training). samples_per_step / tokens_per_step:
        override what the Trainer's state and arguments tell (the job's
        samples per optimizer step; tokens come from
        state.num_input_tokens_seen, i.e. include_num_input_tokens_seen).
        """

        def __init__(self, monitor: Any = None, *, carbon: Any = None, trackers: Sequence[Any] = (),
                     prefix: str = "joule/", summary_file: Optional[str] = SUMMARY_FILE, power_limit: Any = None,
                     recurrence: Any = None, samples_per_step: Optional[float] = None,
                     tokens_per_step: Optional[float] = None, settle_timeout_s: float = 2.0) -> None:
            super().__init__()
            self.run = EnergyRun("hf", monitor, carbon=carbon, trackers=trackers, prefix=prefix,
                                 summary_file=summary_file, power_limit=power_limit, recurrence=recurrence,
                                 settle_timeout_s=settle_timeout_s)
            self.samples_per_step = samples_per_step
            self.tokens_per_step = tokens_per_step
            self._tokens_seen = 0
            self._first = False

        # -- Trainer events ---------------------------------------------------------

        def _move_first(self) -> None:
            """Puts this callback first in the Trainer's CallbackHandler (found up
            the call stack), so that its on_log adds the keys before the
            reporting integrations read the logs. Moving from index k to 0
            keeps the handler's running loop on the callbacks after k."""
            if self._first:
                return
            frame = sys._getframe(1)
            for _ in range(8):
                if frame is None:
                    return
                owner = frame.f_locals.get("self")
                callbacks = getattr(owner, "callbacks", None)
                if isinstance(callbacks, list) and any(c is self for c in callbacks):
                    i = next(i for i, c in enumerate(callbacks) if c is self)
                    if i:
                        callbacks.pop(i)
                        callbacks.insert(0, self)
                    self._first = True
                    return
                frame = frame.f_back

        def on_init_end(self, args, state, control, **kwargs):
            self._move_first()

        def on_train_begin(self, args, state, control, **kwargs):
            self._move_first()
            self.run.start()
            self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)

        def on_epoch_begin(self, args, state, control, **kwargs):
            if self.run.started:
                self.run.epoch_begin()

        def on_step_begin(self, args, state, control, **kwargs):
            if self.run.started:
                self.run.step_begin()

        def on_step_end(self, args, state, control, **kwargs):
            if not self.run.started:
                return
            seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
            tokens = self.tokens_per_step if self.tokens_per_step is not None else max(0, seen - self._tokens_seen)
            self._tokens_seen = seen
            self.run.step_end(self._samples_per_step(args, state), tokens)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            if self.run.started:
                self.run.phase_end(EVAL)

        def on_save(self, args, state, control, **kwargs):
            if self.run.started:
                self.run.phase_end(SAVE)

        def on_epoch_end(self, args, state, control, **kwargs):
            if self.run.started and self.run.epoch_end():
                control.should_training_stop = True

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not self.run.started or logs is None:
                return
            metrics = self.run.interval_metrics()
            logs.update(metrics)
            if metrics and self.run.trackers and getattr(state, "is_world_process_zero", True):
                from .trackers import log_metrics

                log_metrics(self.run.trackers, metrics, int(state.global_step))

        def on_train_end(self, args, state, control, **kwargs):
            if not self.run.started:
                return
            write = bool(getattr(state, "is_world_process_zero", True))
            self.run.finish(getattr(args, "output_dir", None), write, str(getattr(args, "run_name", "") or ""))

        # -- helpers ------------------------------------------------------------------

        def _samples_per_step(self, args, state) -> float:
            if self.samples_per_step is not None:
                return float(self.samples_per_step)
            per_device = getattr(state, "train_batch_size", None)
            if not per_device:
                per_device = int(getattr(args, "per_device_train_batch_size", 0) or 0) * max(
                    1, int(getattr(args, "n_gpu", 1) or 1))
            accumulation = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
            world = int(getattr(args, "world_size", 1) or 1)
            return float(per_device * accumulation * world)
