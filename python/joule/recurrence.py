# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.torch.BatchSizeRecurrence: one recurrence of a job on a
`joule serve` batch-size service (it uses no torch; joule.torch names it)."""
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from ._joule import Monitor, PowerLimitOptimizer
    from .service import Assignment, BatchSizeClient

def _publisher(recurrence: "weakref.ref[BatchSizeRecurrence]"):
    def publish(rows: List[Dict[str, float]]) -> None:
        alive = recurrence()
        if alive is not None:
            alive._publish_profile(rows)

    return publish


class BatchSizeRecurrence:
    """One training run (a recurrence) of a job on a `joule serve`
    batch-size service: asks for its batch size on entry and reports its
    energy and time with finish().

        client = joule.BatchSizeClient()
        monitor = joule.Monitor(synchronize=joule.torch.synchronizer())
        with joule.torch.BatchSizeRecurrence(client, "resnet50", monitor=monitor) as rec:
            loader = make_loader(batch_size=rec.batch_size)
            reached = False
            for epoch in range(max_epochs):
                reached = train_one_epoch(loader)
                if reached or rec.report_progress(epoch + 1):
                    break
            rec.finish(reached_target=reached)

    With a monitor, a window ("joule-recurrence-ID") measures the GPUs'
    energy and the time from entry to finish(); without one, pass energy_j
    and time_s (the run's totals so far) to should_stop() and finish().

    report_progress(epochs) sends the run's progress to the service (kept
    there, and shown by client.export_job) and returns the service's advice;
    should_stop() decides the same locally, without telling the service. Both
    compute the Zeus cost C = eta * E + (1 - eta) * max_power_w * T
    with the job's eta and max_power_w (from client.job(job)["spec"]) and say
    whether it reached the early-stop threshold. finish() reports a run that
    did not reach its target and whose cost reached the threshold as stopped
    early (the service then counts it at the threshold).

    power_limit_w is the limit the service advises for this batch size (None
    without a power profile). make_power_limit_optimizer() builds the
    just-in-time power-limit optimizer for the run, which applies it:

        with joule.torch.BatchSizeRecurrence(client, "resnet50", monitor=monitor) as rec:
            callbacks = joule.torch.TrainingCallbacks(rec.make_power_limit_optimizer())
            ... train with callbacks.epoch() and callbacks.step() ...

    With an advised limit the optimizer starts decided at it (no profiling).
    Without one it profiles during the first epoch and, once decided,
    publishes the profile to the service for this job, this batch size and
    this node's GPU model (the name of the monitor's first GPU; without a
    monitor, the job spec's gpu_model), so the next recurrence with this
    batch size on any node with that model starts decided. The recurrence
    asks with its GPU model, so a job that runs on several models learns a
    limit per model.

    If the with-block exits with an exception, or without finish(), nothing
    is reported: the recurrence stays in flight on the service (it shows in
    client.job(job)["in_flight"]) and teaches the optimizer nothing.
    """

    def __init__(
        self, client: "BatchSizeClient", job: str, node: Optional[str] = None, monitor: Optional["Monitor"] = None
    ) -> None:
        self.client = client
        self.job = job
        self.node = node
        self.monitor = monitor
        self.assignment: Optional["Assignment"] = None  # once entered
        self.cost: Optional[float] = None  # what the service learned, once finished
        self._eta = 0.5
        self._max_power_w = 0.0
        self._window: Optional[str] = None  # entry to finish
        self._probe: Optional[str] = None  # since the last should_stop
        self._probes = 0
        self._probed_energy_j = 0.0
        self._probed_time_s = 0.0
        self._finished = False
        self._gpu_model = ""  # asked with and published under (see gpu_model)
        self.power_limit_optimizer: Optional["PowerLimitOptimizer"] = None  # once made
        # Whether the profile measured in this run reached the service (None:
        # nothing to publish, or not yet).
        self.profile_published: Optional[bool] = None

    def __enter__(self) -> "BatchSizeRecurrence":
        spec = self.client.job(self.job)["spec"]
        self._eta = float(spec["eta"])
        self._max_power_w = float(spec["max_power_w"])
        here = str(self.monitor.gpus[0]["name"]) if self.monitor is not None else ""
        self._gpu_model = here or str(spec.get("gpu_model") or "")
        self.assignment = self.client.ask(self.job, self.node, self._gpu_model or None)
        if self.monitor is not None:
            self._window = f"joule-recurrence-{self.recurrence_id}"
            self._probe = self._next_probe()
            self.monitor.begin_window(self._window)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._close_windows()
        if self.power_limit_optimizer is not None:
            self.power_limit_optimizer.restore()  # the run is over: original limits back
        return False

    @property
    def recurrence_id(self) -> int:
        return self.assignment.recurrence_id

    @property
    def batch_size(self) -> int:
        return self.assignment.batch_size

    @property
    def power_limit_w(self) -> Optional[float]:
        return self.assignment.power_limit_w

    @property
    def early_stop_threshold_cost(self) -> float:
        return self.assignment.early_stop_threshold_cost

    @property
    def gpu_model(self) -> str:
        """The GPU model the recurrence asked with and publishes profiles
        under: the monitor's first GPU's name, else the job spec's gpu_model."""
        if not self._gpu_model:
            raise ValueError("BatchSizeRecurrence: the job has no gpu_model and there is no monitor to ask")
        return self._gpu_model

    def make_power_limit_optimizer(self, **options: Any) -> "PowerLimitOptimizer":
        """The just-in-time power-limit optimizer for this run, on the monitor's
        GPUs (see the class docstring). options go to joule.PowerLimitOptimizer;
        by default it minimises the Zeus cost with the job's eta, as the
        service does. reprofile=True ignores the advised limit."""
        if self.monitor is None:
            raise ValueError("BatchSizeRecurrence.make_power_limit_optimizer needs a monitor")
        if self.assignment is None:
            raise RuntimeError("BatchSizeRecurrence.make_power_limit_optimizer: enter the recurrence first")
        if self.power_limit_optimizer is not None:
            raise RuntimeError(f"recurrence {self.recurrence_id} already has a power-limit optimizer")
        from . import PowerLimitOptimizer

        options.setdefault("objective", "cost")
        options.setdefault("eta", self._eta)
        options.setdefault("job", self.job)
        options.setdefault("batch_size", self.batch_size)
        # The advice (if any) is for this node's GPU model: it asked with it.
        if self.power_limit_w is not None and not options.get("reprofile", False):
            options.setdefault("known_limit_w", self.power_limit_w)
        else:
            # Through a weak reference: the optimizer keeps its callback in C++,
            # where Python's collector cannot see (and break) a cycle back to it.
            options.setdefault("on_profiled", _publisher(weakref.ref(self)))
        self.power_limit_optimizer = PowerLimitOptimizer(self.monitor, **options)
        return self.power_limit_optimizer

    def profile_entries(self, rows: List[Dict[str, float]]) -> List[Dict[str, float]]:
        """The service's entries for the optimizer's rows. The service only
        picks the argmin of eta * avg_power * t + (1 - eta) * max_power_w * t
        over them, so the time of any fixed unit of work will do: a step's.
        max_power_w is one GPU's largest limit, so the power is per GPU (all
        the job's GPUs run at the same limit, which keeps the argmin)."""
        gpus = len(self.monitor.gpus)
        return [
            {"power_limit_w": r["power_limit_w"], "time_per_epoch_s": r["time_per_step_s"],
             "avg_power_w": r["avg_power_w"] / gpus}
            for r in rows
        ]

    def _publish_profile(self, rows: List[Dict[str, float]]) -> None:
        """on_profiled: hands the measured profile to the service. A failure
        warns and training goes on (the next recurrence profiles again)."""
        if self.power_limit_optimizer is not None and self.power_limit_optimizer.observer:
            warnings.warn("joule: observer mode measured every limit at the current one; "
                          "the profile is not published to the service", RuntimeWarning)
            self.profile_published = False
            return
        from .service import ServiceError

        try:
            self.client.put_power_profile(self.job, self.gpu_model, self.batch_size, self.profile_entries(rows))
            self.profile_published = True
        except (ServiceError, ValueError) as e:
            warnings.warn(f"joule: publishing the power profile of job '{self.job}' failed: {e}", RuntimeWarning)
            self.profile_published = False

    def cost_of(self, energy_j: float, time_s: float) -> float:
        """The Zeus cost of energy_j and time_s with the job's eta and max_power_w."""
        return self._eta * energy_j + (1.0 - self._eta) * self._max_power_w * time_s

    def should_stop(self, energy_j: Optional[float] = None, time_s: Optional[float] = None) -> bool:
        """Whether the run so far costs at least the early-stop threshold."""
        if energy_j is None or time_s is None:
            energy_j, time_s = self._measured_so_far()
        return self.cost_of(energy_j, time_s) >= self.early_stop_threshold_cost

    def report_progress(self, epochs: int, energy_j: Optional[float] = None, time_s: Optional[float] = None) -> bool:
        """Tells the service how far the run has got (epochs done; energy and
        time from the monitor unless given), which keeps it for the job's
        export, and returns whether to stop: the service's answer, by the same
        rule as should_stop()."""
        if energy_j is None or time_s is None:
            energy_j, time_s = self._measured_so_far()
        return self.client.progress(self.recurrence_id, epochs, energy_j, time_s).stop

    def finish(self, reached_target: bool, energy_j: Optional[float] = None, time_s: Optional[float] = None) -> float:
        """Reports the run (energy and time from the monitor's window unless
        given); returns the cost the service learned from."""
        if self._finished:
            raise RuntimeError(f"recurrence {self.recurrence_id} has already finished")
        if energy_j is None or time_s is None:
            if self._window is None:
                raise ValueError("BatchSizeRecurrence.finish: without a monitor, pass energy_j and time_s")
            m = self.monitor.end_window(self._window)
            self._window = None
            energy_j, time_s = m.total_energy_j, m.elapsed_s
        self._close_windows()
        stopped_early = not reached_target and self.cost_of(energy_j, time_s) >= self.early_stop_threshold_cost
        self.cost = self.client.report(self.recurrence_id, energy_j, time_s, reached_target, stopped_early)
        self._finished = True
        return self.cost

    def _next_probe(self) -> str:
        self._probes += 1
        name = f"joule-recurrence-{self.recurrence_id}-probe-{self._probes}"
        self.monitor.begin_window(name)
        return name

    def _measured_so_far(self) -> Tuple[float, float]:
        """The energy and time since entry: probe windows laid end to end
        (the next one begins before the last one ends, so nothing is missed)."""
        if self._probe is None:
            raise ValueError("BatchSizeRecurrence.should_stop: without a monitor, pass energy_j and time_s")
        previous, self._probe = self._probe, self._next_probe()
        m = self.monitor.end_window(previous)
        self._probed_energy_j += m.total_energy_j
        self._probed_time_s += m.elapsed_s
        return self._probed_energy_j, self._probed_time_s

    def _close_windows(self) -> None:
        for name in (self._probe, self._window):
            if name is not None:
                try:
                    self.monitor.end_window(name)
                except Exception:  # closing only; nothing is reported
                    pass
        self._probe = self._window = None
