# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""PyTorch helpers on top of the joule module.

    import joule, joule.torch
    monitor = joule.Monitor(synchronize=joule.torch.synchronizer())
    plo = joule.PowerLimitOptimizer(monitor, objective="cost", eta=0.5)
    callbacks = joule.torch.TrainingCallbacks(plo)
    for epoch in range(epochs):
        with callbacks.epoch():
            for batch in loader:
                with callbacks.step():
                    train_step(batch)

With PyTorch Lightning installed, joule.torch.LightningCallback(plo) plugs the
same optimizer into a Trainer: Trainer(callbacks=[joule.torch.LightningCallback(plo)]).

joule.torch.BatchSizeRecurrence(client, job, monitor=monitor) runs one
recurrence of a job on a `joule serve` batch-size service (see its docstring).
"""
import bisect
import collections
import contextlib
import heapq
import math
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch

if TYPE_CHECKING:
    from ._joule import Monitor, PowerLimitOptimizer
    from .service import Assignment, BatchSizeClient


def synchronizer(device=None):
    """A callable that waits for queued CUDA work, or None without CUDA.

    Pass it as Monitor(synchronize=...) so kernels count in the window that
    launched them.
    """
    if not torch.cuda.is_available():
        return None
    return lambda: torch.cuda.synchronize(device)


class TrainingCallbacks:
    """Calls the optimizer's callbacks around epochs and steps of a plain loop."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    @contextlib.contextmanager
    def epoch(self):
        self.optimizer.on_epoch_begin()
        try:
            yield
        finally:
            self.optimizer.on_epoch_end()

    @contextlib.contextmanager
    def step(self):
        self.optimizer.on_step_begin()
        yield
        self.optimizer.on_step_end()


try:  # Lightning is optional
    try:
        from lightning.pytorch.callbacks import Callback as _LightningCallbackBase
    except ImportError:
        from pytorch_lightning.callbacks import Callback as _LightningCallbackBase
except ImportError:
    _LightningCallbackBase = None

if _LightningCallbackBase is not None:

    class LightningCallback(_LightningCallbackBase):
        """PyTorch Lightning callback driving a joule.PowerLimitOptimizer."""

        def __init__(self, optimizer):
            super().__init__()
            self.optimizer = optimizer

        def on_train_epoch_start(self, trainer, pl_module):
            self.optimizer.on_epoch_begin()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.optimizer.on_step_begin()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.optimizer.on_step_end()

        def on_train_epoch_end(self, trainer, pl_module):
            self.optimizer.on_epoch_end()

        def on_train_end(self, trainer, pl_module):
            self.optimizer.restore()



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


def _tensors(value) -> List["torch.Tensor"]:
    """The tensors a module's forward took or returned, as torch's backward
    hooks see them: a tensor, or the tensors of a tuple (not nested, not in
    dicts or lists)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


# What an edge is: a nested region's begin or end, or a concurrent region's
# (RegionRecorder.begin(..., concurrent=True): beside the nesting, any order).
_BEGIN, _END, _BEGIN_CONCURRENT, _END_CONCURRENT = "begin", "end", "begin_concurrent", "end_concurrent"
_CONCURRENT = (_BEGIN_CONCURRENT, _END_CONCURRENT)


def _end_before_last(edges, name: str) -> bool:
    """Puts an end of `name` just before the last nested edge of `edges`
    ((kind, name, stamp) tuples), at its stamp; False if there is none.
    Concurrent edges after it stay after it (their order does not matter)."""
    for i in range(len(edges) - 1, -1, -1):
        if edges[i][0] not in _CONCURRENT:
            edges.insert(i, (_END, name, edges[i][2]))
            return True
    return False


def _hand_over(recorder, kind: str, name: str, at_s: float) -> None:
    if kind in _CONCURRENT:
        (recorder.begin if kind == _BEGIN_CONCURRENT else recorder.end)(name, at_s=at_s, concurrent=True)
    else:
        (recorder.begin if kind == _BEGIN else recorder.end)(name, at_s=at_s)


class CudaEvents:
    """The CUDA calls the GPU clock makes, in one place (tests hand the GPU
    clock a stand-in with the same methods: there is no GPU on their machine)."""

    def new(self):
        return torch.cuda.Event(enable_timing=True)

    def record(self, event) -> None:
        event.record()  # on the current stream: in backward, the one autograd runs the node on

    def done(self, event) -> bool:
        return event.query()

    def elapsed_s(self, earlier, later) -> float:
        return earlier.elapsed_time(later) / 1e3

    def synchronize(self) -> None:
        torch.cuda.synchronize()


class GpuClock:
    """Region edges on the GPU's clock: each edge records a CUDA event (no
    sync), and flush() hands the edges to a joule.RegionRecorder at their
    GPU instants mapped to the monitor's clock.

    The mapping comes from anchors: with the GPU idle, an event is recorded
    between two reads of the monitor's clock, and the closest pair of reads
    over a few tries brackets when it ran (its half-width is the anchor's
    uncertainty). One anchor is taken when the clock is made, one at each
    flush(); an edge between two anchors is placed by the line through them,
    which also takes out the drift between the two clocks. Each edge's GPU
    time is chained from the edge before it (elapsed times between
    neighbours stay small, where a float's milliseconds are exact to well
    under a microsecond), so a long run loses no precision.

    Events are pooled: every `drain_every` edges the completed ones are read
    and reused, without waiting for the GPU.

    begin_concurrent/end_concurrent record a concurrent region's call (work
    on another stream: an all-reduce) on the current stream the same way;
    they are handed over at their own instants (not moved up to the edge
    before them), and an end never before the earliest open call's begin.
    """

    def __init__(self, recorder, events: Optional[Any] = None, anchor_tries: int = 16, drain_every: int = 1024) -> None:
        self.recorder = recorder
        self.events = events if events is not None else CudaEvents()
        self.anchor_tries = anchor_tries
        self.drain_every = drain_every
        self._pool: List[Any] = []
        self._pending: "collections.deque" = collections.deque()  # (kind, name, event), in edge order
        self._chain: Optional[Tuple[Any, float]] = None  # the last read event and its GPU seconds since the first
        self._edges: List[Tuple[str, str, float]] = []  # read, not yet handed over: (kind, name, GPU s)
        # The anchors, in columns (bisect searches the first, Python 3.9 has no key=):
        self._anchor_gpu_s: List[float] = []  # GPU seconds since the first anchor
        self._anchor_at_s: List[float] = []  # the monitor's clock then
        self._anchor_half_s: List[float] = []  # half the bracket: how far it may be off
        self.reordered_edges = 0  # edges the mapping put before the edge before them (moved up to it)
        self._last_s = -math.inf
        self._open_concurrent: Dict[str, List[float]] = collections.defaultdict(list)  # begins handed over, a heap
        self._anchor()

    @property
    def uncertainty_s(self) -> float:
        """The widest anchor's half-width: how far any mapped edge may be off
        the monitor's clock (beside the drift between anchors, taken out)."""
        return max(self._anchor_half_s)

    @property
    def drift_ppm(self) -> float:
        """How much faster the monitor's clock ran than the GPU's between the
        first and the last anchor, in parts per million (0 with one anchor)."""
        if len(self._anchor_gpu_s) < 2:
            return 0.0
        g0, g1 = self._anchor_gpu_s[0], self._anchor_gpu_s[-1]
        h0, h1 = self._anchor_at_s[0], self._anchor_at_s[-1]
        return 1e6 * ((h1 - h0) / (g1 - g0) - 1.0) if g1 > g0 else 0.0

    def begin(self, name: str) -> None:
        self._edge(_BEGIN, name)

    def end(self, name: str) -> None:
        self._edge(_END, name)

    def begin_concurrent(self, name: str) -> None:
        self._edge(_BEGIN_CONCURRENT, name)

    def end_concurrent(self, name: str) -> None:
        self._edge(_END_CONCURRENT, name)

    def end_before_last(self, name: str) -> bool:
        """Ends `name` at the instant of the last nested edge, just before it
        (an edge found late, e.g. by a hook torch runs after another on the
        same gradient). False if that edge was already handed over."""
        return _end_before_last(self._pending, name) or _end_before_last(self._edges, name)

    def flush(self) -> None:
        """Waits for the GPU, anchors, and hands every edge recorded so far to
        the recorder. Call it before attributing a window."""
        self.events.synchronize()
        self._read(wait=True)
        self._anchor()
        for kind, name, gpu_s in self._edges:
            at_s = self._to_monitor_s(gpu_s)
            if kind in _CONCURRENT:
                at_s = self._concurrent_at(kind, name, at_s)
            else:
                if at_s < self._last_s:
                    self.reordered_edges += 1
                    at_s = self._last_s
                self._last_s = at_s
            _hand_over(self.recorder, kind, name, at_s)
        self._edges.clear()

    def _concurrent_at(self, kind: str, name: str, at_s: float) -> float:
        """A concurrent end no earlier than the earliest open call's begin:
        on the GPU it follows it (the communication waits for the stream it
        began on), but chained float milliseconds may put it a hair before."""
        begins = self._open_concurrent[name]
        if kind == _BEGIN_CONCURRENT:
            heapq.heappush(begins, at_s)
            return at_s
        return max(at_s, heapq.heappop(begins)) if begins else at_s

    def _edge(self, kind: str, name: str) -> None:
        event = self._take_event()
        self.events.record(event)
        self._pending.append((kind, name, event))
        if len(self._pending) >= self.drain_every:
            self._read(wait=False)

    def _read(self, wait: bool) -> None:
        """Reads the pending events in order (all of them, or up to the first
        the GPU has not reached), chaining each one's GPU time."""
        while self._pending:
            kind, name, event = self._pending[0]
            if not wait and not self.events.done(event):
                return
            self._pending.popleft()
            self._edges.append((kind, name, self._link(event)))

    def _link(self, event) -> float:
        previous, previous_s = self._chain
        if previous is event:  # two edges at one instant (end_before_last)
            return previous_s
        gpu_s = previous_s + self.events.elapsed_s(previous, event)
        self._pool.append(previous)
        self._chain = (event, gpu_s)
        return gpu_s

    def _anchor(self) -> None:
        """An anchor with the GPU idle: the tightest bracket of several tries."""
        self.events.synchronize()
        best = None
        for _ in range(self.anchor_tries):
            event = self._take_event()
            before = self.recorder.clock_s()
            self.events.record(event)
            self.events.synchronize()
            after = self.recorder.clock_s()
            if best is None or after - before < best[2] - best[1]:
                if best is not None:
                    self._pool.append(best[0])
                best = (event, before, after)
            else:
                self._pool.append(event)
        event, before, after = best
        gpu_s = 0.0 if self._chain is None else self._link(event)
        self._chain = (event, gpu_s)
        self._anchor_gpu_s.append(gpu_s)
        self._anchor_at_s.append(0.5 * (before + after))
        self._anchor_half_s.append(0.5 * (after - before))

    def _take_event(self):
        return self._pool.pop() if self._pool else self.events.new()

    def _to_monitor_s(self, gpu_s: float) -> float:
        """The line through the anchors on either side of gpu_s (the last two
        past the end; the first with the clocks' rates equal before two)."""
        gpus, ats = self._anchor_gpu_s, self._anchor_at_s
        if len(gpus) == 1:
            return ats[0] + (gpu_s - gpus[0])
        i = min(max(bisect.bisect_right(gpus, gpu_s), 1), len(gpus) - 1)
        g0, g1, h0, h1 = gpus[i - 1], gpus[i], ats[i - 1], ats[i]
        return h0 + (gpu_s - g0) * ((h1 - h0) / (g1 - g0) if g1 > g0 else 1.0)


class HostClock:
    """Region edges at host instants on the monitor's clock (after a CUDA
    sync when the recorder's monitor was made with a synchronize), held
    until flush() as GpuClock's are, so that an edge found late can still go
    before the one recorded last. Concurrent edges may come from another
    thread (a Gloo all-reduce completes on Gloo's)."""

    uncertainty_s = 0.0

    def __init__(self, recorder) -> None:
        self.recorder = recorder
        self._sync = torch.cuda.synchronize if recorder.synchronized and torch.cuda.is_available() else None
        self._edges: List[Tuple[str, str, float]] = []

    def begin(self, name: str) -> None:
        self._edges.append((_BEGIN, name, self._now()))

    def end(self, name: str) -> None:
        self._edges.append((_END, name, self._now()))

    def begin_concurrent(self, name: str) -> None:
        self._edges.append((_BEGIN_CONCURRENT, name, self._now()))

    def end_concurrent(self, name: str) -> None:
        self._edges.append((_END_CONCURRENT, name, self._now()))

    def end_before_last(self, name: str) -> bool:
        return _end_before_last(self._edges, name)

    def flush(self) -> None:
        edges, self._edges = self._edges, []  # a Gloo thread may append meanwhile: to the new list
        for kind, name, at_s in edges:
            _hand_over(self.recorder, kind, name, at_s)

    def _now(self) -> float:
        if self._sync is not None:
            self._sync()
        return self.recorder.clock_s()


def measure_sample_response(monitor: "Monitor", seconds: float = 40.0, gpu: int = 0, seed: int = 1,
                            max_segment_ms: float = 40.0, raw: Optional[Dict[str, Any]] = None):
    """How this GPU's power samples respond to its power, for
    joule.attribute(sample_response=...) and RegionAttribution.result: the
    GPU alternates a memory-bound elementwise chain ("high", ~600 W on an
    H200 and steady: a matmul's power swings +-40 W under the power limit)
    and a near-idle spin for random lengths (1 ms to max_segment_ms each, so
    no period aliases with the sampling) for `seconds`, recorded on the GPU's
    clock, and joule.fit_sample_response fits the response lag by lag.
    Read-only: it only runs kernels. Keep the result per GPU model and driver
    (SampleResponse.to_dict(), joule.SampleResponse(response_ms, first_lag_ms)).
    raw (a dict) receives the window's samples and segments for your own fits.
    """
    import random
    import time

    from . import RegionRecorder, fit_sample_response

    device = torch.device("cuda", gpu)
    x = torch.ones(128 * 1024 * 1024, device=device, dtype=torch.bfloat16)  # 256 MiB
    with torch.cuda.device(device):
        op_ms, cycles_per_ms = _time_kernels(lambda: x.mul_(0.999).add_(0.001))
        rng = random.Random(seed)
        recorder = RegionRecorder(monitor)
        edges = GpuClock(recorder)
        with monitor.window("joule-sample-response") as w:
            until = time.perf_counter() + seconds
            while time.perf_counter() < until:
                edges.begin("high")
                for _ in range(max(1, round(rng.uniform(1, max_segment_ms) / op_ms))):
                    x.mul_(0.999).add_(0.001)
                edges.end("high")
                edges.begin("low")
                torch.cuda._sleep(int(rng.uniform(1, max_segment_ms) * cycles_per_ms))
                edges.end("low")
            torch.cuda.synchronize()
        edges.flush()
    settled = w.settled(timeout_s=5.0)
    if raw is not None:
        raw.update(begin_s=settled.begin_s, end_s=settled.end_s,
                   samples=monitor.observed_power(gpu, settled.begin_s, settled.end_s),
                   intervals=recorder.intervals(settled.begin_s, settled.end_s))
    return fit_sample_response(monitor, settled, recorder, gpu=gpu)


def _time_kernels(op) -> Tuple[float, float]:
    """Milliseconds per op(), and torch.cuda._sleep cycles per millisecond."""
    for _ in range(5):
        op()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        op()
    end.record()
    end.synchronize()
    op_ms = start.elapsed_time(end) / 20
    start.record()
    torch.cuda._sleep(5_000_000)
    end.record()
    end.synchronize()
    return op_ms, 5_000_000 / start.elapsed_time(end)


_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict)


class _BackwardCall:
    """One forward call's backward region: it begins when the gradient of
    any of the call's outputs is computed (its backward can start), and ends
    when the gradients of all its inputs that need one are (or, with none,
    of all its parameters)."""

    __slots__ = ("session", "name", "waiting", "started", "ended")

    def __init__(self, session: "RegionAttribution", name: str, waiting: int) -> None:
        self.session, self.name, self.waiting = session, name, waiting
        self.started = self.ended = False

    def start(self, grad=None):
        if not self.started:
            self.started = True
            self.session._begin(self.name)
        return None

    def done(self, grad=None):
        self.waiting -= 1
        if self.waiting == 0 and self.started and not self.ended:
            self.ended = True
            self.session._end(self.name)
        return None


class RegionAttribution:
    """Records the regions of a training step from a model's modules, for
    joule.attribute: each module at `depth` (0: the model itself, 1: its
    direct children, 2: theirs, ...; a ModuleList or ModuleDict is not a
    level, its items stand where it stands; named by their path in
    named_modules()) records "<path>.forward" and "<path>.backward", an
    optimizer's step "optimizer.step", and region(name) any block of yours.

        monitor = joule.Monitor()
        with joule.torch.attribute(model, monitor, optimizer=opt) as session:
            with monitor.window("train") as w:
                for x, y in loader:
                    with session.region("data"):
                        x, y = x.cuda(), y.cuda()
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
        for gpu, a in enumerate(session.result(w.settled(timeout_s=5.0))):
            print(joule.attribution.format_table(a, gpu_label=f"GPU {gpu}"))

    The window should last many steps (tens of seconds on a real GPU): the
    fit needs the steps' phase to drift against the driver's power samples.

    clock="gpu" (the default with CUDA): every edge records a CUDA event on
    the current stream, so an edge is when the GPU got there, not when the
    host queued it; no sync is added. result() (or flush()) waits for the GPU
    and maps the events to the monitor's clock (GpuClock: anchors at entry
    and at each flush, drift taken out; clock_uncertainty_s says how
    closely). clock="host": edges are host instants, the GPU's only with a
    Monitor made with a synchronize (a sync per edge).

    Backward regions hang on the autograd graph: a pre-hook on the node that
    made the call's output begins it, hooks on its inputs (put on before the
    module runs, so an in-place op inside it or after it changes nothing) end it;
    a call whose inputs need no gradient (the first layer) ends when its
    parameters' gradients are computed. An input that other modules use too
    (a residual branch's) ends the backward when its whole gradient is
    summed, so the region then includes the other users' backward; nested
    regions that autograd interleaves are closed around each other and notes
    says where. A call whose forward returns no tensor requiring grad (a
    dict, a dataclass), or with neither inputs nor parameters requiring
    grad, gets no backward region (its time counts as idle) and a line in
    notes. phases=False records forward regions only.

    On exit every hook is removed and the optimizer's step restored; regions
    left open (an exception in forward) are closed. result(measurement,
    **options) calls joule.attribute with this session's recorder: one
    joule.Attribution per GPU.

    torch.distributed: with a DistributedDataParallel model (or ddp=, the
    DDP wrapping `model`), its modules are hooked by their paths in the
    wrapped module. With allreduce=True each bucket's gradient all-reduce is
    also recorded as a call of the concurrent region "allreduce" (it
    overlaps backward on its own stream; the fit takes the power it adds):
    see register_comm_hook, which this calls with DDP's own all-reduce
    unless you called it first. Opt-in because DDP keeps a comm hook for
    good and a Python one costs every later step (+9-16% of a 42 ms step
    on two H200s, outside sessions too; bench/README.md section 16).
    It begins when DDP hands the bucket over (an edge on the current stream:
    when backward got there) and ends in the future's then-callback: with
    NCCL on a stream that waited for the communication (when it finished on
    the GPU), with Gloo on the host when Gloo's thread finished (use
    clock="host" with Gloo). Buckets queue on one communication stream, so
    a call's time includes its wait behind earlier buckets; the region's
    time is the time any call ran, and each bucket is a call.
    """

    def __init__(self, model: "torch.nn.Module", monitor: "Monitor", depth: int = 1, phases: bool = True,
                 optimizer: Optional["torch.optim.Optimizer"] = None, clock: Optional[str] = None,
                 events: Optional[Any] = None, ddp: Optional["torch.nn.parallel.DistributedDataParallel"] = None,
                 allreduce: bool = False) -> None:
        if depth < 0:
            raise ValueError("joule.torch.attribute: depth must be >= 0")
        if clock is None:
            clock = "gpu" if (events is not None or torch.cuda.is_available()) else "host"
        if clock not in ("gpu", "host"):
            raise ValueError(f"joule.torch.attribute: clock must be 'gpu' or 'host', not {clock!r}")
        if clock == "gpu" and events is None and not torch.cuda.is_available():
            raise ValueError("joule.torch.attribute: clock='gpu' needs CUDA (use clock='host')")
        from . import RegionRecorder

        self.model = model
        if ddp is None and isinstance(model, torch.nn.parallel.DistributedDataParallel):
            ddp = model
        self.ddp = ddp
        self.allreduce = allreduce
        self._root = model.module if model is ddp else model  # the user's module paths, not "module.*"
        self._comm: Optional[_CommRecording] = None  # while this session records the all-reduce
        self.monitor = monitor
        self.depth = depth
        self.phases = phases
        self.optimizer = optimizer
        self.clock = clock
        self.recorder = RegionRecorder(monitor)
        self.edges: Any = None  # GpuClock or HostClock, made on entry
        self._events = events
        self._last_edge: Optional[Tuple[bool, str]] = None
        self.notes: List[str] = []
        self._noted: set = set()
        self._open: List[str] = []  # mirrors the recorder's stack
        self._params_waiting: List[Any] = []  # per hooked module: its calls ending on parameter gradients
        self._handles: List[Any] = []
        self._step = None  # the optimizer's own step, while wrapped

    @property
    def clock_uncertainty_s(self) -> float:
        """How far a mapped edge may be off the monitor's clock (0 with host edges)."""
        return self.edges.uncertainty_s if self.edges is not None else 0.0

    # The modules at the depth, by path; ModuleList and ModuleDict are no level.
    def modules(self) -> List[Tuple[str, "torch.nn.Module"]]:
        if self.depth == 0:
            return [(type(self._root).__name__, self._root)]
        out: List[Tuple[str, "torch.nn.Module"]] = []

        def walk(prefix: str, module: "torch.nn.Module", level: int) -> None:
            for name, child in module.named_children():
                path = f"{prefix}.{name}" if prefix else name
                if isinstance(child, _CONTAINERS):
                    walk(path, child, level)
                elif level + 1 == self.depth:
                    out.append((path, child))
                else:
                    walk(path, child, level + 1)

        walk("", self._root, 0)
        return out

    def __enter__(self) -> "RegionAttribution":
        try:
            self.edges = GpuClock(self.recorder, events=self._events) if self.clock == "gpu" else HostClock(self.recorder)
            for path, module in self.modules():
                self._hook(path, module)
            if self.optimizer is not None:
                self._wrap_step()
            if self.ddp is not None and self.allreduce:
                self._record_allreduce()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._remove()
        self.flush()
        return False

    def region(self, name: str):
        """A block of yours as a region: `with session.region("data"): ...`."""
        return _SessionRegion(self, name)

    def flush(self) -> None:
        """Hands the GPU edges recorded so far to the recorder (waits for the GPU)."""
        if self.edges is not None:
            self.edges.flush()
            moved = getattr(self.edges, "reordered_edges", 0)
            if moved:
                self._note("reordered", f"{moved} GPU edges mapped before the edge before them were moved up to it "
                           "(events on several streams?)")

    def result(self, measurement, **options) -> list:
        """joule.attribute(monitor, measurement, recorder, **options): one
        joule.Attribution per GPU. Settle the measurement first."""
        from . import attribute

        self.flush()
        return attribute(self.monitor, measurement, self.recorder, **options)

    # -- recording --------------------------------------------------------

    def _note(self, key: str, text: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)

    def _edge(self, begin: bool, name: str) -> None:
        (self.edges.begin if begin else self.edges.end)(name)
        self._last_edge = (begin, name)

    def _begin(self, name: str) -> None:
        if name in self._open:  # left open (an exception, a backward that never came): close it first
            self._note(f"reopened {name}", f"{name}: began again while still open; the open call was closed")
            self._end(name)
        self._edge(True, name)
        self._open.append(name)

    def _end(self, name: str) -> None:
        if name not in self._open:
            self._note(f"not open {name}", f"{name}: ended without having begun; that edge was skipped")
            return
        inner = self._open[self._open.index(name) + 1:]
        if inner == [name_ for begun, name_ in [self._last_edge] if begun] and self.edges.end_before_last(name):
            # The one inside began at the last edge, with no work since: this
            # end was found late (torch ran the begin's hook first on the same
            # gradient) and goes just before it.
            self._open.remove(name)
            return
        if inner:  # interleaved (autograd ran branches around each other)
            self._note(f"interleaved {name}", f"{name} ended while {', '.join(inner)} inside it ran: "
                       "those were closed and begun again (each such call counts twice)")
        for other in reversed(inner):
            self._edge(False, other)
            self._open.pop()
        self._edge(False, name)
        self._open.pop()
        for other in inner:
            self._edge(True, other)
            self._open.append(other)

    def _hook(self, path: str, module: "torch.nn.Module") -> None:
        forward, backward = f"{path}.forward", f"{path}.backward"
        params = [p for p in module.parameters() if p.requires_grad]
        calls: List[_BackwardCall] = []  # begun in forward_pre, finished in forward_post (a stack: re-entry)
        params_waiting: "collections.deque" = collections.deque()  # calls ending on parameter gradients, in order

        def forward_pre(mod, args):
            call = None
            if self.phases and torch.is_grad_enabled():
                inputs = [t for t in _tensors(args) if t.requires_grad]
                call = _BackwardCall(self, backward, len(inputs))
                for t in inputs:  # before the module runs: an in-place op on them cannot move the hook
                    t.register_hook(call.done)
            calls.append(call)
            self._begin(forward)

        def forward_post(mod, args, output):
            self._end(forward)
            call = calls.pop() if calls else None
            if call is None:
                return None
            outputs = [t for t in _tensors(output) if t.requires_grad]
            if not outputs:
                self._note(f"no output {path}", f"{backward}: not recorded (forward returns no tensor requiring "
                           f"grad that the hooks see: {type(output).__name__})")
                call.started = True  # nothing will begin it
                call.ended = True
                return None
            if call.waiting == 0:
                if not params:
                    self._note(f"no grad {path}", f"{backward}: not recorded (neither its inputs nor its "
                               "parameters require grad)")
                    return None
                call.waiting = len(params)
                params_waiting.append([call, set()])
            # On the node that made the output (its pre-hooks run after every
            # tensor hook on its gradient, so the backward that ends there, the
            # next module's, ends first); on the tensor itself for a leaf.
            for t in outputs:
                if t.grad_fn is not None:
                    t.grad_fn.register_prehook(call.start)
                else:
                    t.register_hook(call.start)
            return None

        def param_done(index):
            def hook(grad):
                if params_waiting:
                    call, seen = params_waiting[0]
                    seen.add(index)
                    if len(seen) == len(params):
                        params_waiting.popleft()
                        call.waiting = 1
                        call.done()
                return None
            return hook

        self._handles.append(module.register_forward_pre_hook(forward_pre))
        self._handles.append(module.register_forward_hook(forward_post))
        if self.phases:
            for index, p in enumerate(params):
                self._handles.append(p.register_hook(param_done(index)))
        self._params_waiting.append(params_waiting)

    def _wrap_step(self) -> None:
        optimizer = self.optimizer
        step = optimizer.step  # a bound method (or whatever was there)
        had_own = "step" in vars(optimizer)

        def wrapped(*args, **kwargs):
            self._begin("optimizer.step")
            try:
                return step(*args, **kwargs)
            finally:
                self._end("optimizer.step")

        optimizer.step = wrapped
        self._step = (step, had_own)

    def _record_allreduce(self) -> None:
        """Has the DDP model's comm hook record into this session's edges."""
        recording = getattr(self.ddp, "_joule_comm", None)
        if recording is None:
            try:
                recording = register_comm_hook(self.ddp)
            except RuntimeError as e:
                if "only be called once" not in str(e):
                    raise
                self._note("allreduce", f"{ALLREDUCE}: not recorded: the DDP model already has a communication "
                           "hook and DDP takes one; register yours through joule.torch.register_comm_hook(model, "
                           "state, hook) instead to have its calls recorded")
                return
        if recording.edges is not None:
            self._note("allreduce", f"{ALLREDUCE}: not recorded: another joule.torch.attribute session on this "
                       "model records it")
            return
        recording.edges = self.edges
        self._comm = recording

    def _remove(self) -> None:
        if self._comm is not None:  # DDP keeps the hook: it goes on communicating, recording nothing
            self._comm.edges = None
            self._comm = None
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._step is not None:
            step, had_own = self._step
            if had_own:
                self.optimizer.step = step
            else:
                del self.optimizer.step
            self._step = None
        while self._open:
            name = self._open[-1]
            self._note(f"left open {name}", f"{name}: still open when the session ended; closed there")
            self._end(name)
        for waiting in self._params_waiting:
            waiting.clear()
        self._params_waiting.clear()


class _SessionRegion:
    def __init__(self, session: RegionAttribution, name: str) -> None:
        self.session, self.name = session, name

    def __enter__(self) -> "_SessionRegion":
        self.session._begin(self.name)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.session._end(self.name)
        return False


def attribute(model: "torch.nn.Module", monitor: "Monitor", depth: int = 1, phases: bool = True,
              optimizer: Optional["torch.optim.Optimizer"] = None, clock: Optional[str] = None,
              ddp: Optional["torch.nn.parallel.DistributedDataParallel"] = None,
              allreduce: bool = False) -> RegionAttribution:
    """Records a model's regions for energy attribution: a context manager
    (see RegionAttribution). phases=False records forward regions only;
    clock "gpu" (default with CUDA: CUDA events) or "host". A
    DistributedDataParallel model (or ddp=, the DDP wrapping `model`) is
    hooked by the wrapped module's paths; allreduce=True also records its
    gradient all-reduce as the concurrent region "allreduce", through a
    Python comm hook that DDP keeps for good (it slows every later step:
    docs/attribution.md, "Concurrent regions")."""
    return RegionAttribution(model, monitor, depth=depth, phases=phases, optimizer=optimizer, clock=clock, ddp=ddp,
                             allreduce=allreduce)


ALLREDUCE = "allreduce"  # the concurrent region of DDP's gradient all-reduce


class _CommRecording:
    """Where a DDP model's comm hook records: the open session's edges
    (None between sessions: the hook then only communicates)."""

    __slots__ = ("edges",)

    def __init__(self) -> None:
        self.edges: Any = None


def register_comm_hook(ddp: "torch.nn.parallel.DistributedDataParallel", state: Any = None,
                       hook: Optional[Any] = None) -> _CommRecording:
    """Registers a DDP communication hook whose calls joule.torch.attribute
    sessions on `ddp` record as the concurrent region "allreduce" (one call
    per bucket per step). hook(state, bucket) -> Future[Tensor] is yours
    (register it through this instead of ddp.register_comm_hook to combine
    it with the recording); by default DDP's own all-reduce
    (default_hooks.allreduce_hook on ddp.process_group: divide by the
    group's size, sum), which leaves the gradients as DDP's built-in one.
    DDP takes one hook, for good (it cannot be removed): outside a session
    it communicates and records nothing. attribute() calls this itself."""
    if getattr(ddp, "_joule_comm", None) is not None:
        raise RuntimeError("joule.torch.register_comm_hook: this DDP model has joule's comm hook already")
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        hook, state = default_hooks.allreduce_hook, (ddp.process_group if state is None else state)
    recording = _CommRecording()

    def joule_recorded_comm_hook(state, bucket):  # DDP checks the name "bucket"
        edges = recording.edges
        if edges is None:
            return hook(state, bucket)
        edges.begin_concurrent(ALLREDUCE)

        def ended(future):
            # With NCCL torch runs this on streams that waited for the
            # communication: an edge here is when it finished on the GPU.
            edges.end_concurrent(ALLREDUCE)
            return future.value()

        return hook(state, bucket).then(ended)

    ddp.register_comm_hook(state, joule_recorded_comm_hook)
    ddp._joule_comm = recording
    return recording
