# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Stand-ins for transformers 5.x and Lightning 2.6, for the tests of
joule.hf and joule.lightning (CI has neither).

Only the parts joule touches, with the hook signatures of those versions
(transformers: src/transformers/trainer_callback.py, the event order of
Trainer._inner_training_loop / _maybe_log_save_evaluate / log / evaluate;
Lightning: src/lightning/pytorch/callbacks/callback.py, the fit loop's hook
order, LightningModule.log's signature), and drivers that call them in the
order a real training run with evaluation and checkpointing does. Each
simulated step, evaluation and save draws power on the simulated GPUs for a
few milliseconds (monitor.set_simulated_load, then a sleep).

install_transformers(monkeypatch) / install_lightning(monkeypatch) put the
stand-ins in sys.modules (undone after the test).
"""
from __future__ import annotations

import dataclasses
import sys
import time
import types
from typing import Any, Dict, List, Optional

import torch


def work(monitor, seconds: float, load: float) -> None:
    if monitor is not None:
        monitor.set_simulated_load(load)
    time.sleep(seconds)


# -- transformers 5.x -----------------------------------------------------------------------


@dataclasses.dataclass
class TrainingArguments:  # the fields joule reads, with transformers' defaults where it has them
    output_dir: str = "trainer_output"
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    num_train_epochs: float = 3.0
    logging_steps: float = 500
    eval_strategy: str = "no"
    eval_steps: Optional[float] = None
    save_strategy: str = "steps"
    save_steps: float = 500
    run_name: Optional[str] = None
    report_to: Any = "none"
    include_num_input_tokens_seen: Any = "no"
    n_gpu: int = 1  # a property in transformers (GPUs of this process); 1 per process under torchrun
    world_size: int = 1  # a property in transformers: the number of processes


@dataclasses.dataclass
class TrainerState:
    epoch: Optional[float] = None
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: Optional[int] = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: List[Dict[str, float]] = dataclasses.field(default_factory=list)
    best_metric: Optional[float] = None
    best_model_checkpoint: Optional[str] = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: Optional[str] = None
    trial_params: Optional[Dict[str, Any]] = None


@dataclasses.dataclass
class TrainerControl:
    should_training_stop: bool = False
    should_epoch_stop: bool = False
    should_save: bool = False
    should_evaluate: bool = False
    should_log: bool = False


class TrainerCallback:
    def on_init_end(self, args, state, control, **kwargs): pass
    def on_train_begin(self, args, state, control, **kwargs): pass
    def on_train_end(self, args, state, control, **kwargs): pass
    def on_epoch_begin(self, args, state, control, **kwargs): pass
    def on_epoch_end(self, args, state, control, **kwargs): pass
    def on_step_begin(self, args, state, control, **kwargs): pass
    def on_pre_optimizer_step(self, args, state, control, **kwargs): pass
    def on_optimizer_step(self, args, state, control, **kwargs): pass
    def on_substep_end(self, args, state, control, **kwargs): pass
    def on_step_end(self, args, state, control, **kwargs): pass
    def on_evaluate(self, args, state, control, **kwargs): pass
    def on_predict(self, args, state, control, metrics, **kwargs): pass
    def on_save(self, args, state, control, **kwargs): pass
    def on_log(self, args, state, control, **kwargs): pass
    def on_prediction_step(self, args, state, control, **kwargs): pass
    def on_push_begin(self, args, state, control, **kwargs): pass


class DefaultFlowCallback(TrainerCallback):
    """transformers' flow: log / evaluate / save every N steps (steps strategy)."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            control.should_log = True
        if state.logging_steps and state.global_step % state.logging_steps == 0:
            control.should_log = True
        if args.eval_strategy == "steps" and state.global_step % state.eval_steps == 0:
            control.should_evaluate = True
        if args.save_strategy == "steps" and state.save_steps > 0 and state.global_step % state.save_steps == 0:
            control.should_save = True
        if state.global_step >= state.max_steps:
            control.should_training_stop = True
            if args.save_strategy != "no":
                control.should_save = True
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if args.eval_strategy == "epoch":
            control.should_evaluate = True
        if args.save_strategy == "epoch":
            control.should_save = True
        return control


class ReportingCallback(TrainerCallback):
    """What report_to adds (TensorBoardCallback, WandbCallback, ...): reads on_log's logs."""

    def __init__(self) -> None:
        self.logged: List[Dict[str, float]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero:
            self.logged.append(dict(logs))


class CallbackHandler(TrainerCallback):
    def __init__(self, callbacks, model, processing_class, optimizer, lr_scheduler):
        self.callbacks = list(callbacks)
        self.model = model
        self.processing_class = processing_class
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.train_dataloader = None
        self.eval_dataloader = None

    def call_event(self, event, args, state, control, **kwargs):
        for callback in self.callbacks:
            result = getattr(callback, event)(
                args, state, control, model=self.model, processing_class=self.processing_class,
                optimizer=self.optimizer, lr_scheduler=self.lr_scheduler,
                train_dataloader=self.train_dataloader, eval_dataloader=self.eval_dataloader, **kwargs)
            if result is not None:
                control = result
        return control

    def on_step_begin(self, args, state, control):
        control.should_log = control.should_evaluate = control.should_save = False
        return self.call_event("on_step_begin", args, state, control)

    def on_evaluate(self, args, state, control, metrics):
        control.should_evaluate = False
        return self.call_event("on_evaluate", args, state, control, metrics=metrics)

    def on_save(self, args, state, control):
        control.should_save = False
        return self.call_event("on_save", args, state, control)

    def on_log(self, args, state, control, logs):
        control.should_log = False
        return self.call_event("on_log", args, state, control, logs=logs)

    def on_epoch_begin(self, args, state, control):
        control.should_epoch_stop = False
        return self.call_event("on_epoch_begin", args, state, control)


class Trainer:
    """Drives the callbacks as transformers' Trainer.train() does. The
    reporting integrations come before the user's callbacks, as
    DEFAULT_CALLBACKS + report_to + callbacks do."""

    def __init__(self, args, callbacks=None, monitor=None, steps_per_epoch=6, tokens_per_step=0,
                 step_s=0.012, eval_s=0.03, save_s=0.02, rank=0, world_size=1):
        self.args = args
        self.monitor = monitor  # the simulated GPUs' monitor: work draws power on it
        self.reporter = ReportingCallback()
        self.callback_handler = CallbackHandler([DefaultFlowCallback(), self.reporter] + list(callbacks or []),
                                                torch.nn.Linear(2, 2), None, None, None)
        self.state = TrainerState(is_local_process_zero=rank == 0, is_world_process_zero=rank == 0)
        self.control = TrainerControl()
        self.steps_per_epoch = steps_per_epoch
        self.tokens_per_step = tokens_per_step
        self.step_s, self.eval_s, self.save_s = step_s, eval_s, save_s
        self.saves = 0
        self.control = self.callback_handler.call_event("on_init_end", args, self.state, self.control)

    def log(self, logs):
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        if self.args.include_num_input_tokens_seen != "no":
            logs["num_input_tokens_seen"] = self.state.num_input_tokens_seen
        output = {**logs, **{"step": self.state.global_step}}
        self.state.log_history.append(output)
        self.control = self.callback_handler.on_log(self.args, self.state, self.control, logs)

    def evaluate(self):
        for _ in range(3):
            work(self.monitor, self.eval_s / 3, 0.6)
            self.control = self.callback_handler.call_event("on_prediction_step", self.args, self.state, self.control)
        metrics = {"eval_loss": 0.5}
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _maybe_log_save_evaluate(self):
        if self.control.should_log:
            self.log({"loss": 1.0, "grad_norm": 0.1, "learning_rate": 1e-3})
        if self.control.should_evaluate:
            self.evaluate()
        if self.control.should_save:
            work(self.monitor, self.save_s, 0.2)
            self.saves += 1
            self.control = self.callback_handler.on_save(self.args, self.state, self.control)

    def train(self):
        args, state = self.args, self.state
        epochs = int(args.num_train_epochs)
        state.max_steps = epochs * self.steps_per_epoch
        state.num_train_epochs = epochs
        state.logging_steps = int(args.logging_steps)
        state.eval_steps = int(args.eval_steps or args.logging_steps)
        state.save_steps = int(args.save_steps)
        state.train_batch_size = args.per_device_train_batch_size * args.n_gpu
        self.control = self.callback_handler.call_event("on_train_begin", args, state, self.control)
        for epoch in range(epochs):
            self.control = self.callback_handler.on_epoch_begin(args, state, self.control)
            for step in range(self.steps_per_epoch):
                work(self.monitor, 0.002, 0.1)  # the data loader
                self.control = self.callback_handler.on_step_begin(args, state, self.control)
                for micro in range(args.gradient_accumulation_steps):
                    work(self.monitor, self.step_s / args.gradient_accumulation_steps, 1.0)
                    state.num_input_tokens_seen += self.tokens_per_step // args.gradient_accumulation_steps
                    if micro < args.gradient_accumulation_steps - 1:
                        self.control = self.callback_handler.call_event("on_substep_end", args, state, self.control)
                self.control = self.callback_handler.call_event("on_pre_optimizer_step", args, state, self.control)
                self.control = self.callback_handler.call_event("on_optimizer_step", args, state, self.control)
                state.global_step += 1
                state.epoch = epoch + (step + 1) / self.steps_per_epoch
                self.control = self.callback_handler.call_event("on_step_end", args, state, self.control)
                self._maybe_log_save_evaluate()
                if self.control.should_epoch_stop or self.control.should_training_stop:
                    break
            self.control = self.callback_handler.call_event("on_epoch_end", args, state, self.control)
            self._maybe_log_save_evaluate()
            if self.control.should_training_stop:
                break
        self.log({"train_runtime": 1.0, "train_loss": 1.0})
        self.control = self.callback_handler.call_event("on_train_end", args, state, self.control)


def install_transformers(monkeypatch):
    mod = types.ModuleType("transformers")
    for name in ("TrainerCallback", "TrainerState", "TrainerControl", "TrainingArguments", "DefaultFlowCallback"):
        setattr(mod, name, globals()[name])
    monkeypatch.setitem(sys.modules, "transformers", mod)
    monkeypatch.delitem(sys.modules, "joule.hf", raising=False)
    return mod


# -- Lightning 2.6 ----------------------------------------------------------------------------


class Callback:
    def setup(self, trainer, pl_module, stage): pass
    def teardown(self, trainer, pl_module, stage): pass
    def on_fit_start(self, trainer, pl_module): pass
    def on_fit_end(self, trainer, pl_module): pass
    def on_sanity_check_start(self, trainer, pl_module): pass
    def on_sanity_check_end(self, trainer, pl_module): pass
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx): pass
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx): pass
    def on_train_epoch_start(self, trainer, pl_module): pass
    def on_train_epoch_end(self, trainer, pl_module): pass
    def on_validation_epoch_start(self, trainer, pl_module): pass
    def on_validation_epoch_end(self, trainer, pl_module): pass
    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0): pass
    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0): pass
    def on_train_start(self, trainer, pl_module): pass
    def on_train_end(self, trainer, pl_module): pass
    def on_validation_start(self, trainer, pl_module): pass
    def on_validation_end(self, trainer, pl_module): pass
    def on_exception(self, trainer, pl_module, exception): pass
    def on_save_checkpoint(self, trainer, pl_module, checkpoint): pass
    def on_load_checkpoint(self, trainer, pl_module, checkpoint): pass
    def on_before_backward(self, trainer, pl_module, loss): pass
    def on_after_backward(self, trainer, pl_module): pass
    def on_before_optimizer_step(self, trainer, pl_module, optimizer): pass
    def on_before_zero_grad(self, trainer, pl_module, optimizer): pass


# Hooks from which LightningModule.log is allowed (lightning's _FxValidator), and on_step there.
_LOG_ALLOWED = {"on_train_batch_start": True, "on_train_batch_end": True, "on_train_epoch_start": False,
                "on_train_epoch_end": False, "on_validation_epoch_end": False, "on_validation_batch_end": True,
                "training_step": True, "validation_step": True}


class LightningModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trainer = None
        self.layer = torch.nn.Linear(4, 1)

    def log(self, name, value, prog_bar=False, logger=None, on_step=None, on_epoch=None, reduce_fx="mean",
            enable_graph=False, sync_dist=False, sync_dist_group=None, add_dataloader_idx=True, batch_size=None,
            metric_attribute=None, rank_zero_only=False):
        fx = self.trainer.current_fx
        if fx not in _LOG_ALLOWED:
            raise RuntimeError(f"You can't `self.log()` inside `{fx}`")
        if on_step and not _LOG_ALLOWED[fx]:
            raise RuntimeError(f"You can't `self.log({name}, ..., on_step=True)` inside `{fx}`")
        if not isinstance(value, (int, float, torch.Tensor)):
            raise ValueError(f"self.log({name}): {type(value).__name__} is not a number")
        self.trainer.step_values[name] = float(value)
        self.trainer.all_log_calls.append((fx, name, float(value), on_step, on_epoch))


class RecordingLogger:
    """A Lightning Logger's log_metrics(metrics, step)."""

    def __init__(self):
        self.calls: List[tuple] = []

    def log_metrics(self, metrics, step=None):
        self.calls.append((dict(metrics), step))


class LightningTrainer:
    """Calls the callbacks in the order of Lightning 2.6's fit(): setup,
    on_fit_start, the sanity check's validation, on_train_start, epochs of
    batches with validation (and ModelCheckpoint's save) at each epoch's end,
    on_train_end, on_fit_end, teardown. Values logged with on_step go to the
    loggers every log_every_n_steps, as the logger connector does."""

    def __init__(self, callbacks, monitor=None, max_epochs=2, batches=6, batch_size=4, seq_len=16,
                 log_every_n_steps=2, default_root_dir="lightning_logs", step_s=0.012, val_s=0.03, save_s=0.02,
                 rank=0, world_size=1):
        self.callbacks = list(callbacks)
        self.monitor = monitor
        self.max_epochs = max_epochs
        self.batches = batches
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.log_every_n_steps = log_every_n_steps
        self.default_root_dir = default_root_dir
        self.log_dir = default_root_dir
        self.loggers = [RecordingLogger()]
        self.logger = self.loggers[0]
        self.global_step = 0
        self.current_epoch = 0
        self.is_global_zero = rank == 0
        self.global_rank = rank
        self.world_size = world_size
        self.sanity_checking = False
        self.should_stop = False
        self.current_fx = None
        self.step_values: Dict[str, float] = {}
        self.all_log_calls: List[tuple] = []
        self.step_s, self.val_s, self.save_s = step_s, val_s, save_s

    def _call(self, hook, *args):
        self.current_fx = hook
        for cb in self.callbacks:
            getattr(cb, hook)(self, self.module, *args)
        self.current_fx = None

    def _validate(self):
        self._call("on_validation_start")
        self._call("on_validation_epoch_start")
        for i in range(2):
            batch = (torch.zeros(self.batch_size, 4), torch.zeros(self.batch_size))
            self._call("on_validation_batch_start", batch, i, 0)
            work(self.monitor, self.val_s / 2, 0.6)
            self._call("on_validation_batch_end", None, batch, i, 0)
        self._call("on_validation_epoch_end")
        self._call("on_validation_end")

    def fit(self, module):
        self.module = module
        module.trainer = self
        self._call("setup", "fit")
        self._call("on_fit_start")
        self.sanity_checking = True
        self._call("on_sanity_check_start")
        self._validate()
        self._call("on_sanity_check_end")
        self.sanity_checking = False
        self._call("on_train_start")
        for epoch in range(self.max_epochs):
            self.current_epoch = epoch
            self._call("on_train_epoch_start")
            for i in range(self.batches):
                work(self.monitor, 0.002, 0.1)  # the data loader
                batch = {"input_ids": torch.ones(self.batch_size, self.seq_len, dtype=torch.long),
                         "attention_mask": torch.ones(self.batch_size, self.seq_len, dtype=torch.long),
                         "labels": torch.zeros(self.batch_size)}
                self._call("on_train_batch_start", batch, i)
                work(self.monitor, self.step_s, 1.0)
                self.global_step += 1
                self._call("on_train_batch_end", {"loss": torch.tensor(1.0)}, batch, i)
                if self.global_step % self.log_every_n_steps == 0 and self.step_values:
                    for logger in self.loggers:
                        logger.log_metrics(dict(self.step_values), step=self.global_step - 1)
                self.step_values = {}
            self._validate()
            # ModelCheckpoint saves at the end of validation: on_save_checkpoint, then the write.
            self._call("on_save_checkpoint", {})
            work(self.monitor, self.save_s, 0.2)
            self._call("on_train_epoch_end")
            if self.should_stop:
                break
        self._call("on_train_end")
        self._call("on_fit_end")
        self._call("teardown", "fit")


def install_lightning(monkeypatch):
    root = types.ModuleType("lightning")
    pytorch = types.ModuleType("lightning.pytorch")
    callbacks = types.ModuleType("lightning.pytorch.callbacks")
    callbacks.Callback = Callback
    pytorch.callbacks = callbacks
    pytorch.Callback = Callback
    pytorch.LightningModule = LightningModule
    root.pytorch = pytorch
    for name, mod in (("lightning", root), ("lightning.pytorch", pytorch), ("lightning.pytorch.callbacks", callbacks)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "joule.lightning", raising=False)
    return root
