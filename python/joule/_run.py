# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What joule.hf and joule.lightning share: one training run's phases, the
metrics they log, the run summary (reduced over ranks) and the optional
power-limit optimizer. Private: the public names are in joule.hf,
joule.lightning and joule.meter."""
from __future__ import annotations

import json
import math
import os
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

from . import _joule
from .meter import PhaseMeter, PhaseTotals, carbon_metrics, default_monitor, process_layout, sync_cuda

SUMMARY_FILE = "joule_energy.json"
TRAIN_STEP = "train_step"
OTHER = "other"
EVAL = "eval"
SAVE = "save"


def can_control_gpus() -> bool:
    """Whether GPU settings could change here: root, or a jouled socket."""
    socket = os.environ.get("JOULE_DAEMON_SOCKET", "/run/joule/jouled.sock")
    return (hasattr(os, "geteuid") and os.geteuid() == 0) or os.path.exists(socket)


def make_power_limit_optimizer(power_limit: Any, monitor: Any, recurrence: Any) -> Any:
    """None (the default: no optimizer, GPU settings untouched), "observe"
    (profiles and reports, never changes a setting), "optimize" (applies the
    chosen limit where it can: root or jouled; else observer mode, warned) or
    a ready PowerLimitOptimizer. With a BatchSizeRecurrence the optimizer is
    the recurrence's (its advised limit, its profile published)."""
    if monitor is None:
        return None  # this rank measures nothing: the node's leader drives the node's GPUs
    if power_limit is None and recurrence is None:
        return None
    if power_limit is None or isinstance(power_limit, str):
        mode = power_limit or "observe"
        if mode not in ("observe", "optimize"):
            raise _joule.UsageError(f"power_limit must be None, 'observe', 'optimize' or an optimizer, not {mode!r}")
        observer = mode == "observe" or not can_control_gpus()
        if mode == "optimize" and observer:
            warnings.warn("joule: no jouled and not root: the power-limit optimizer runs in observer mode "
                          "(GPU settings stay as they are)", RuntimeWarning)
        if recurrence is not None:
            return recurrence.make_power_limit_optimizer(observer=observer)
        return _joule.PowerLimitOptimizer(monitor, observer=observer)
    return power_limit


def _gather(obj: Any) -> List[Any]:
    """obj from every rank (rank order) where torch.distributed runs a job of
    several processes; else [obj]. Collective: every rank calls it."""
    try:
        import torch.distributed as dist
    except ImportError:
        return [obj]
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return [obj]
    group = dist.new_group(backend="gloo")
    out: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=group)
    return out


# Ended phases are settled when metrics are logged, and at least this often
# (in steps): a poll is a call into the module, which costs 10-15 us after a
# step of framework code, so not one a step.
POLL_EVERY_STEPS = 64


class EnergyRun:
    """One training run measured phase by phase (see PhaseMeter)."""

    def __init__(self, framework: str, monitor: Any = None, *, carbon: Any = None, trackers: Sequence[Any] = (),
                 prefix: str = "joule/", summary_file: Optional[str] = SUMMARY_FILE, power_limit: Any = None,
                 recurrence: Any = None, settle_timeout_s: float = 2.0) -> None:
        self.framework = framework
        self._monitor_arg = monitor
        self.carbon = carbon
        self.trackers = list(trackers)
        self.prefix = prefix
        self.summary_file = summary_file
        self.power_limit = power_limit
        self.recurrence = recurrence
        self.settle_timeout_s = settle_timeout_s
        self.layout = process_layout()
        self.monitor: Any = None
        self.meter: Optional[PhaseMeter] = None
        self.optimizer: Any = None
        self.summary: Optional[Dict[str, Any]] = None
        self.summary_path: Optional[str] = None
        self.epochs = 0
        self.finished = False
        # Between start() and finish(): a plain attribute, read by every hook.
        self.started = False
        self._started_wall = 0.0

    # -- the run's edges ------------------------------------------------------

    def start(self) -> None:
        if self._monitor_arg is not None:
            self.monitor = self._monitor_arg
            if self.layout.world_size > 1 and not self.layout.measuring:
                self.monitor = None  # counted once: another rank measures this node
        else:
            self.monitor = default_monitor()
        self.meter = PhaseMeter(self.monitor, f"joule.{self.framework}")
        if self.monitor is not None:
            sync_cuda()  # the run's edges wait for the GPU; its steps' do not (make_monitor)
        self.meter.begin_outer("train")
        self.meter.switch(OTHER)
        self.optimizer = make_power_limit_optimizer(self.power_limit, self.monitor, self.recurrence)
        self.epochs = 0
        self._steps = 0
        # The job's counts scaled to the GPUs this process measures.
        self._share = self.layout.ranks_covered / self.layout.world_size if self.layout.world_size > 1 else 1.0
        self.summary = None
        self.finished = False
        self.started = True
        self._started_wall = time.time()

    def epoch_begin(self) -> None:
        self.meter.begin_outer(f"epoch-{self.epochs}")
        if self.optimizer is not None:
            self.optimizer.on_epoch_begin()

    def epoch_end(self) -> bool:
        """Ends the epoch; True where the batch-size service says to stop."""
        self.meter.end_outer(f"epoch-{self.epochs}")
        self.epochs += 1
        if self.optimizer is not None:
            self.optimizer.on_epoch_end()
        if self.recurrence is not None and self.monitor is not None:
            return bool(self.recurrence.report_progress(self.epochs))
        return False

    def step_begin(self) -> None:
        self.meter.switch(TRAIN_STEP)
        self._steps += 1
        if self._steps % POLL_EVERY_STEPS == 0:
            self.meter.poll()  # keeps the ended phases few where nothing logs for long
        if self.optimizer is not None:
            self.optimizer.on_step_begin()

    def step_end(self, samples: float, tokens: float) -> None:
        """samples, tokens: the job's, this step (this process scales them to the GPUs it measures)."""
        share = self._share
        self.meter.switch(OTHER, samples * share, tokens * share)
        if self.optimizer is not None:
            self.optimizer.on_step_end()

    def phase_end(self, phase: str) -> None:
        """The open window turned out to be `phase` (an evaluation, a save): credit it so, go on with OTHER."""
        self.meter.switch(OTHER, ended_as=phase)

    def phase_begin(self, phase: str) -> None:
        self.meter.switch(phase)

    # -- what is logged -----------------------------------------------------------

    def interval_metrics(self) -> Dict[str, float]:
        """The windows settled since the previous call, as metrics (empty
        where nothing settled or nothing is measured here)."""
        meter = self.meter
        if meter is None or not meter.measuring:
            return {}
        meter.poll()
        iv = meter.take_interval()
        p = self.prefix
        out: Dict[str, float] = {}
        if iv:
            energy = sum(t.energy_j for t in iv.values())
            seconds = sum(t.time_s for t in iv.values())
            out[p + "energy_j"] = energy
            out[p + "time_s"] = seconds
            out[p + "power_w"] = energy / seconds if seconds > 0 else 0.0
            train = PhaseTotals()
            for name, t in iv.items():
                if name not in (EVAL, SAVE):
                    train.energy_j += t.energy_j
                    train.time_s += t.time_s
                    train.samples += t.samples
                    train.tokens += t.tokens
            out[p + "train_energy_j"] = train.energy_j
            if train.samples:
                out[p + "energy_per_sample_j"] = train.energy_j / train.samples
            if train.tokens:
                out[p + "energy_per_token_j"] = train.energy_j / train.tokens
            for name in (EVAL, SAVE):
                if name in iv:
                    out[p + f"{name}_energy_j"] = iv[name].energy_j
        for outer in meter.take_outer():
            if outer["name"].startswith("epoch-"):
                out[p + "epoch_energy_j"] = outer["energy_j"]
                out[p + "epoch_time_s"] = outer["time_s"]
        if out:
            total = meter.energy_j
            out[p + "total_energy_j"] = total
            out.update(carbon_metrics(self.carbon, total, p))
        return out

    def step_metrics(self) -> Dict[str, float]:
        """The latest settled train step and the running totals (for loggers
        that keep one value per step, as Lightning's)."""
        meter = self.meter
        if meter is None or not meter.measuring:
            return {}
        meter.poll()
        meter.take_interval()
        p = self.prefix
        out: Dict[str, float] = {}
        last = meter.last.get(TRAIN_STEP)
        if last is not None:
            out[p + "step_energy_j"] = last["energy_j"]
            out[p + "step_power_w"] = last["energy_j"] / last["time_s"] if last["time_s"] > 0 else 0.0
            if last["samples"]:
                out[p + "energy_per_sample_j"] = last["energy_j"] / last["samples"]
            if last["tokens"]:
                out[p + "energy_per_token_j"] = last["energy_j"] / last["tokens"]
        for outer in meter.take_outer():
            if outer["name"].startswith("epoch-"):
                out[p + "epoch_energy_j"] = outer["energy_j"]
                out[p + "epoch_time_s"] = outer["time_s"]
        if meter.totals:
            total = meter.energy_j
            out[p + "total_energy_j"] = total
            out.update(carbon_metrics(self.carbon, total, p))
        return out

    # -- the end --------------------------------------------------------------------

    def finish(self, output_dir: Optional[str], write: bool, run_name: str = "") -> Dict[str, Any]:
        """Settles everything, restores GPU settings, reduces over ranks
        (collective where several processes run) and writes the summary
        (where write: the world's rank 0) to output_dir/summary_file."""
        meter = self.meter
        self.finished = True
        self.started = False
        if meter.measuring:
            sync_cuda()
        meter.finish(self.settle_timeout_s)
        if self.optimizer is not None:
            self.optimizer.restore()
        mine = self._local_summary()
        everyone = _gather(mine)
        summary = self._reduce(everyone, run_name)
        self.summary = summary
        if write and output_dir and self.summary_file:
            os.makedirs(output_dir, exist_ok=True)
            path = os.path.join(output_dir, self.summary_file)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=2, sort_keys=True, default=str)
                f.write("\n")
            self.summary_path = path
        if write:
            from .trackers import log_summary

            log_summary(self.trackers, summary)
        return summary

    def _local_summary(self) -> Dict[str, Any]:
        meter = self.meter
        train = next((o for o in meter.outer_done if o["name"] == "train"), None)
        epochs = [o for o in meter.outer_done if o["name"].startswith("epoch-")]
        gpus = [str(g.get("name", "")) for g in self.monitor.gpus] if self.monitor is not None else []
        opt = None
        if self.optimizer is not None:
            opt = {"state": self.optimizer.state, "observer": self.optimizer.observer,
                   "chosen_limit_w": self.optimizer.chosen_limit_w, "report": self.optimizer.report()}
        return {
            "rank": self.layout.rank, "measuring": self.monitor is not None, "gpus": gpus,
            "phases": {k: v.to_dict() for k, v in meter.totals.items()},
            "train_window": train, "epochs": epochs, "power_limit": opt,
        }

    def _reduce(self, everyone: List[Dict[str, Any]], run_name: str) -> Dict[str, Any]:
        phases: Dict[str, PhaseTotals] = {}
        train_e = 0.0
        train_t = 0.0
        cpu_e = 0.0
        epochs: Dict[str, Dict[str, float]] = {}
        gpus: List[str] = []
        unsettled = 0
        for r in everyone:
            if not r["measuring"]:
                continue
            gpus.extend(r["gpus"])
            for name, d in r["phases"].items():
                t = phases.setdefault(name, PhaseTotals())
                t.energy_j += d["energy_j"]
                t.time_s = max(t.time_s, d["time_s"])  # the ranks' phases run side by side
                t.windows = max(t.windows, d["windows"])
                t.samples += d["samples"]
                t.tokens += d["tokens"]
                t.unsettled += d["unsettled"]
            if r["train_window"] is not None:
                train_e += r["train_window"]["energy_j"]
                train_t = max(train_t, r["train_window"]["time_s"])
                cpu_e += r["train_window"]["cpu_energy_j"]
                unsettled += 0 if r["train_window"]["settled"] else 1
            for e in r["epochs"]:
                ep = epochs.setdefault(e["name"], {"epoch": int(e["name"].split("-")[1]), "energy_j": 0.0, "time_s": 0.0})
                ep["energy_j"] += e["energy_j"]
                ep["time_s"] = max(ep["time_s"], e["time_s"])
        energy = sum(t.energy_j for t in phases.values())
        samples = sum(t.samples for t in phases.values())
        tokens = sum(t.tokens for t in phases.values())
        unsettled += sum(t.unsettled for t in phases.values())
        summary: Dict[str, Any] = {
            "joule_summary": 1,
            "framework": self.framework,
            "run": run_name,
            "started_unix_s": self._started_wall,
            "energy_j": energy,
            "energy_kwh": energy / 3.6e6,
            "time_s": train_t,
            "average_power_w": energy / train_t if train_t > 0 else 0.0,
            "train_window_energy_j": train_e,
            "cpu_energy_j": cpu_e,
            "phases": {k: v.to_dict() for k, v in sorted(phases.items())},
            "epochs": sorted(epochs.values(), key=lambda e: e["epoch"]),
            "samples": samples,
            "tokens": tokens,
            "gpus": gpus,
            "layout": {"mode": self.layout.mode, "world_size": self.layout.world_size,
                       "measuring_ranks": [r["rank"] for r in everyone if r["measuring"]]},
            "unsettled_windows": unsettled,
            "power_limit": next((r["power_limit"] for r in everyone if r["power_limit"] is not None), None),
        }
        train_phase_e = sum(t.energy_j for k, t in phases.items() if k not in (EVAL, SAVE))
        if samples:
            summary["energy_per_sample_j"] = train_phase_e / samples
        if tokens:
            summary["energy_per_token_j"] = train_phase_e / tokens
        if self.carbon is not None:
            fp = dict(self.carbon.footprint(energy))
            summary["carbon"] = fp
            summary["co2e_g"] = fp.get("co2e_g")
            summary["cost"] = fp.get("cost")
            summary["currency"] = fp.get("currency")
        if not any(r["measuring"] for r in everyone):
            summary["energy_j"] = math.nan
        return summary


class RunCallback:
    """What joule's framework callbacks (joule.hf, joule.lightning) share
    around the EnergyRun their hooks drive: what it found."""

    run: EnergyRun

    @property
    def summary(self) -> Optional[Dict[str, Any]]:
        """The run summary (after the run's end), as written to the file."""
        return self.run.summary

    @property
    def summary_path(self) -> Optional[str]:
        return self.run.summary_path

    @property
    def meter(self):
        return self.run.meter


def unavailable_callback(name: str, install: str) -> type:
    """The stand-in for a framework's callback where the framework is not
    installed: making one raises ImportError saying what to install."""

    class Unavailable:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(f"{name} needs {install.split()[-1]} ({install})")

    Unavailable.__name__ = Unavailable.__qualname__ = name.rsplit(".", 1)[-1]
    return Unavailable
