# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""PyTorch Lightning: energy of every batch, epoch and validation, logged
to every attached logger (trainer.loggers).

    import joule.lightning
    trainer = L.Trainer(callbacks=[joule.lightning.EnergyCallback()])
    trainer.fit(model, datamodule=dm)    # logs joule/*; writes <log_dir>/joule_energy.json

A measurement callback; joule.torch.LightningCallback(plo) (the
power-limit optimizer alone) stays as it was, and this one can drive the
optimizer too (power_limit=...). Phases laid end to end (train_step, eval,
other), each epoch and the run, settle lazily (no batch waits). On the
steps whose values Lightning sends to its loggers (every
log_every_n_steps) the callback hands its values to trainer.loggers'
log_metrics under the same step, not through pl_module.log: that turns
every number into a tensor on the module's device, a copy the host waits
for (on an H100, 7 values cost 2.4 ms at each logging step of a 9 ms-step
CNN, +2.5% on average; bench/README.md section 17). module_log=True logs
through pl_module.log instead (callback_metrics, the progress bar with
log_options={"prog_bar": True}, a checkpoint's monitor). The values are
the latest settled step (joule/step_energy_j,
joule/step_power_w, joule/energy_per_sample_j, joule/energy_per_token_j),
the latest settled epoch (joule/epoch_energy_j) and the running total
(joule/total_energy_j, joule/co2e_g, joule/cost with carbon=). At the end the
run summary goes to the file and, on global rank 0, to trainer.loggers'
log_metrics (as joule/run/...) and to trackers=. Checkpoint saving has no
hook after the write in Lightning: it counts in "other".

Needs lightning (or pytorch_lightning); joule does not depend on it.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ._run import EVAL, SUMMARY_FILE, EnergyRun, RunCallback, unavailable_callback

try:
    try:
        from lightning.pytorch.callbacks import Callback as _Base
    except ImportError:
        from pytorch_lightning.callbacks import Callback as _Base
except ImportError:  # pragma: no cover - exercised without Lightning
    _Base = None

__all__ = ["EnergyCallback", "batch_counts"]

# The summary's figures sent to trainer.loggers at the end, as joule/run/<key>.
RUN_KEYS = ("energy_j", "energy_kwh", "time_s", "average_power_w", "train_window_energy_j", "samples", "tokens",
            "energy_per_sample_j", "energy_per_token_j", "co2e_g", "cost")


try:
    import torch as _torch
except ImportError:  # pragma: no cover - Lightning needs torch
    _torch = None


def _first_tensor(x: Any) -> Any:
    """The first tensor in a batch (tensors, mappings, lists, tuples), depth first; None if none."""
    if isinstance(x, _torch.Tensor):
        return x
    if isinstance(x, dict):
        x = x.values()
    elif not isinstance(x, (list, tuple)):
        return None
    for v in x:
        t = _first_tensor(v)
        if t is not None:
            return t
    return None


def batch_counts(batch: Any, tokens: bool = True) -> "tuple[float, float]":
    """(samples, tokens) of one batch: samples from the first tensor's first
    dimension; tokens (unless tokens=False) where the batch is a mapping with
    attention_mask (its sum) or input_ids (its size). 0 where nothing tells.
    Runs at every batch: module-level helpers, one shape read."""
    if _torch is None:  # pragma: no cover
        return 0.0, 0.0
    t = _first_tensor(batch)
    shape = t.shape if t is not None else ()
    samples = float(shape[0]) if shape else 0.0
    count = 0.0
    if tokens and isinstance(batch, dict):
        mask = batch.get("attention_mask")
        ids = batch.get("input_ids")
        if isinstance(mask, _torch.Tensor):
            count = float(mask.sum().item())
        elif isinstance(ids, _torch.Tensor):
            count = float(ids.numel())
    return samples, count


def loggers_take_this_step(trainer: Any) -> bool:
    """Whether Lightning sends this batch's values to its loggers: every
    log_every_n_steps (or when stopping); it drops the others, so joule
    logs only then. Its own rule where the trainer has it (the logger
    connector), else the same rule on the public counters."""
    connector = getattr(trainer, "_logger_connector", None)
    rule = getattr(connector, "should_update_logs", None)
    if isinstance(rule, bool):
        return rule
    every = getattr(trainer, "log_every_n_steps", 1) or 0
    if every <= 0:
        return False
    return int(getattr(trainer, "global_step", 0)) % every == 0 or bool(getattr(trainer, "should_stop", False))


class LogCadence:
    """loggers_take_this_step for one run, cheaper: Lightning 2.x's rule
    (its logger connector's should_update_logs: (batches that stepped + 1)
    % log_every_n_steps == 0, or stopping) on the loop it counts in, found
    once at train start, where the property walks five attributes at every
    batch (8 us of the callback's ~25 on an H100 host). Where the trainer
    lacks those internals, loggers_take_this_step itself."""

    def __init__(self, trainer: Any) -> None:
        self._trainer = trainer
        loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
        every = getattr(trainer, "log_every_n_steps", None)
        known = (isinstance(getattr(loop, "_batches_that_stepped", None), int) and isinstance(every, int)
                 and isinstance(getattr(getattr(trainer, "_logger_connector", None), "should_update_logs", None), bool))
        self._loop = loop if known else None
        self._every = every if known else 0

    def __call__(self) -> bool:
        loop = self._loop
        if loop is None:
            return loggers_take_this_step(self._trainer)
        if self._every <= 0:
            return bool(self._trainer.should_stop)
        return (loop._batches_that_stepped + 1) % self._every == 0 or bool(self._trainer.should_stop)


def logger_step(trainer: Any) -> int:
    """The step Lightning logs this batch's own values under: its count of
    batches that stepped, which in on_train_batch_end is one behind
    global_step (it grows after the loggers are fed)."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    stepped = getattr(loop, "_batches_that_stepped", None)
    if isinstance(stepped, int):
        return stepped
    return max(0, int(getattr(trainer, "global_step", 0)) - 1)


if _Base is None:
    EnergyCallback = unavailable_callback("joule.lightning.EnergyCallback", "pip install lightning")

else:

    class EnergyCallback(RunCallback, _Base):  # type: ignore[no-redef,valid-type,misc]
        """A Lightning Callback measuring the run's energy.

        Options as joule.hf.EnergyCallback (monitor, carbon, trackers, prefix,
        summary_file, power_limit, recurrence), plus: count_tokens (read
        tokens from each batch with batch_counts: attention_mask.sum() costs
        a device sync per batch where the mask lives on the GPU),
        samples_per_batch / tokens_per_batch (the per-rank figures, where
        the batch does not tell), module_log (log the step values through
        pl_module.log instead of trainer.loggers: see the module's
        docstring for what that costs) with log_options (more
        pl_module.log keyword arguments, e.g. {"prog_bar": True}). The
        summary is written to trainer.log_dir (else default_root_dir) by
        global rank 0.
        """

        def __init__(self, monitor: Any = None, *, carbon: Any = None, trackers: Sequence[Any] = (),
                     prefix: str = "joule/", summary_file: Optional[str] = SUMMARY_FILE, power_limit: Any = None,
                     recurrence: Any = None, count_tokens: bool = True, samples_per_batch: Optional[float] = None,
                     tokens_per_batch: Optional[float] = None, module_log: bool = False,
                     log_options: Optional[dict] = None, settle_timeout_s: float = 2.0) -> None:
            super().__init__()
            self.run = EnergyRun("lightning", monitor, carbon=carbon, trackers=trackers, prefix=prefix,
                                 summary_file=summary_file, power_limit=power_limit, recurrence=recurrence,
                                 settle_timeout_s=settle_timeout_s)
            self.count_tokens = count_tokens
            self.samples_per_batch = samples_per_batch
            self.tokens_per_batch = tokens_per_batch
            self.module_log = module_log
            self.log_options = dict(log_options or {})

        def on_train_start(self, trainer, pl_module):
            self.run.start()
            self._loggers_take_this_step = LogCadence(trainer)

        def on_train_epoch_start(self, trainer, pl_module):
            if self.run.started:
                self.run.epoch_begin()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if self.run.started:
                self.run.step_begin()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if not self.run.started:
                return
            samples, tokens = batch_counts(batch, self.count_tokens and self.tokens_per_batch is None)
            if self.samples_per_batch is not None:
                samples = float(self.samples_per_batch)
            if self.tokens_per_batch is not None:
                tokens = float(self.tokens_per_batch)
            world = self.run.layout.world_size
            # The job's counts: every rank runs a batch of this size.
            self.run.step_end(samples * world, tokens * world)
            if not self._loggers_take_this_step():
                return
            metrics = self.run.step_metrics()
            if not metrics:
                return
            if self.module_log:
                for name, value in metrics.items():
                    pl_module.log(name, value, on_step=True, on_epoch=False, **self.log_options)
            if not getattr(trainer, "is_global_zero", True):
                return  # Lightning's loggers write on global rank 0 alone
            step = logger_step(trainer)
            if not self.module_log:
                for logger in getattr(trainer, "loggers", None) or []:
                    logger.log_metrics(metrics, step=step)
            if self.run.trackers:
                from .trackers import log_metrics

                log_metrics(self.run.trackers, metrics, step)

        def on_validation_start(self, trainer, pl_module):
            if self.run.started and not getattr(trainer, "sanity_checking", False):
                self.run.phase_begin(EVAL)

        def on_validation_end(self, trainer, pl_module):
            if self.run.started and not getattr(trainer, "sanity_checking", False):
                self.run.phase_end(EVAL)

        def on_train_epoch_end(self, trainer, pl_module):
            if self.run.started and self.run.epoch_end():
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            if not self.run.started:
                return
            write = bool(getattr(trainer, "is_global_zero", True))
            out = getattr(trainer, "log_dir", None) or getattr(trainer, "default_root_dir", None)
            summary = self.run.finish(out, write)
            if write:
                values = {f"{self.run.prefix}run/{k}": summary[k] for k in RUN_KEYS
                          if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)}
                for logger in getattr(trainer, "loggers", []) or []:
                    logger.log_metrics(values, step=int(trainer.global_step))

        def on_exception(self, trainer, pl_module, exception):
            if self.run.started and self.run.optimizer is not None:
                self.run.optimizer.restore()
