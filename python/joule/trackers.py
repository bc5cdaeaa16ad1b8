# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy series and run summaries into experiment trackers, through the
user's own objects (no tracker is a dependency of joule).

One small interface, Tracker: log_metrics(metrics, step) and
log_summary(summary). Adapters:

    joule.trackers.TensorBoard(writer)           # torch.utils.tensorboard / tensorboardX SummaryWriter
    joule.trackers.MLflow(mlflow)                # the mlflow module (its active run) ...
    joule.trackers.MLflow(client=c, run_id=id)   # ... or an MlflowClient and a run id
    joule.trackers.WandB(run)                    # a wandb Run (wandb.init(...), offline mode too)

adapt(obj) picks one (anything that already has log_metrics and
log_summary, e.g. a Lightning logger with a log_summary, is used as is;
a Lightning logger's log_metrics(metrics, step) is the same call).
joule.hf.EnergyCallback, joule.lightning.EnergyCallback and joule.window take
trackers=[...].
"""
from __future__ import annotations

import json
import math
import numbers
from typing import Any, Dict, Iterable, Mapping, Optional

try:
    from typing import Protocol
except ImportError:  # pragma: no cover - Python < 3.8
    Protocol = object  # type: ignore

__all__ = ["MLflow", "TensorBoard", "Tracker", "WandB", "adapt", "flatten", "log_metrics", "log_summary"]


class Tracker(Protocol):
    def log_metrics(self, metrics: Dict[str, float], step: int) -> None: ...

    def log_summary(self, summary: Dict[str, Any]) -> None: ...


def _numbers(metrics: Mapping[str, Any]) -> Dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            continue
        v = float(v)
        if math.isfinite(v):
            out[k] = v
    return out


def flatten(summary: Mapping[str, Any], prefix: str = "", sep: str = "/") -> Dict[str, Any]:
    """Nested dicts as one level ("phases/train_step/energy_j"); lists as JSON text."""
    out: Dict[str, Any] = {}
    for k, v in summary.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + sep, sep))
        elif isinstance(v, (list, tuple)):
            out[key] = json.dumps(v, default=str)
        else:
            out[key] = v
    return out


class TensorBoard:
    """A SummaryWriter: add_scalar per metric; the summary as add_text (JSON)
    and its numbers as scalars under summary_prefix."""

    def __init__(self, writer: Any, summary_tag: str = "joule/summary", summary_prefix: str = "joule/run/") -> None:
        self.writer = writer
        self.summary_tag = summary_tag
        self.summary_prefix = summary_prefix

    def log_metrics(self, metrics: Dict[str, float], step: int) -> None:
        for k, v in _numbers(metrics).items():
            self.writer.add_scalar(k, v, step)

    def log_summary(self, summary: Dict[str, Any]) -> None:
        text = "```json\n" + json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n```"
        self.writer.add_text(self.summary_tag, text, 0)
        for k, v in _numbers(flatten({k: v for k, v in summary.items() if not isinstance(v, Mapping)})).items():
            self.writer.add_scalar(self.summary_prefix + k, v, 0)
        if hasattr(self.writer, "flush"):
            self.writer.flush()


class MLflow:
    """MLflow: the mlflow module (log_metrics / log_dict on its active run) or
    an MlflowClient with a run_id (log_metric per value / log_dict)."""

    def __init__(self, mlflow: Any = None, *, client: Any = None, run_id: Optional[str] = None,
                 summary_file: str = "joule_energy.json") -> None:
        if (mlflow is None) == (client is None):
            raise ValueError("joule.trackers.MLflow: pass the mlflow module, or client= and run_id=")
        if client is not None and not run_id:
            raise ValueError("joule.trackers.MLflow: client= needs run_id=")
        self.mlflow = mlflow
        self.client = client
        self.run_id = run_id
        self.summary_file = summary_file

    def log_metrics(self, metrics: Dict[str, float], step: int) -> None:
        values = _numbers(metrics)
        if not values:
            return
        if self.client is not None:
            for k, v in values.items():
                self.client.log_metric(self.run_id, k, v, step=step)
        else:
            self.mlflow.log_metrics(values, step=step)

    def log_summary(self, summary: Dict[str, Any]) -> None:
        data = json.loads(json.dumps(summary, default=str))
        if self.client is not None:
            self.client.log_dict(self.run_id, data, self.summary_file)
        else:
            self.mlflow.log_dict(data, self.summary_file)


class WandB:
    """A W&B run: run.log(metrics) (with step=, unless use_step=False: where
    another integration, e.g. the HF Trainer's, already steps the run) and
    the summary's values into run.summary. Works the same in offline mode."""

    def __init__(self, run: Any, use_step: bool = True, summary_prefix: str = "joule/") -> None:
        self.run = run
        self.use_step = use_step
        self.summary_prefix = summary_prefix

    def log_metrics(self, metrics: Dict[str, float], step: int) -> None:
        values = _numbers(metrics)
        if not values:
            return
        if self.use_step:
            self.run.log(values, step=step)
        else:
            self.run.log(values)

    def log_summary(self, summary: Dict[str, Any]) -> None:
        flat = {self.summary_prefix + k: v for k, v in flatten(summary).items() if v is not None}
        target = self.run.summary
        if hasattr(target, "update"):
            target.update(flat)
        else:
            for k, v in flat.items():
                target[k] = v


def adapt(obj: Any) -> Any:
    """A Tracker for obj: itself where it has both methods; else a
    SummaryWriter, an MlflowClient-less mlflow module or a wandb run by
    their methods."""
    if hasattr(obj, "log_metrics") and hasattr(obj, "log_summary"):
        return obj
    if hasattr(obj, "add_scalar") and hasattr(obj, "add_text"):
        return TensorBoard(obj)
    if hasattr(obj, "log_metrics") and hasattr(obj, "log_dict"):
        return MLflow(obj)
    if hasattr(obj, "log") and hasattr(obj, "summary"):
        return WandB(obj)
    if hasattr(obj, "log_metrics"):  # e.g. a Lightning logger: metrics only
        return _MetricsOnly(obj)
    raise TypeError(f"joule.trackers: no adapter for {type(obj).__name__}; "
                    "pass an object with log_metrics(metrics, step) and log_summary(summary)")


class _MetricsOnly:
    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def log_metrics(self, metrics: Dict[str, float], step: int) -> None:
        values = _numbers(metrics)
        if values:
            self.logger.log_metrics(values, step=step)

    def log_summary(self, summary: Dict[str, Any]) -> None:
        self.log_metrics({"joule/run/" + k: v for k, v in flatten(summary).items()}, 0)


def log_metrics(trackers: Iterable[Any], metrics: Dict[str, float], step: int) -> None:
    for t in trackers:
        adapt(t).log_metrics(metrics, step)


def log_summary(trackers: Iterable[Any], summary: Dict[str, Any]) -> None:
    for t in trackers:
        adapt(t).log_summary(summary)
