# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Windows with running estimates, and the phase accounting behind joule.hf,
joule.lightning and plain (or Accelerate) loops.

    import joule
    for epoch in range(epochs):
        with joule.window(f"epoch-{epoch}") as w:
            for batch in loader:
                train_step(batch)
                print(w.energy_so_far_j, w.elapsed_s, w.average_power_w)   # running
        print(w.energy_j, w.measurement)                                   # settled

Energies here are the measured GPUs' energy (Measurement.gpu_total_energy_j;
the whole Measurement, CPU packages and DRAM included, is w.measurement).

The monitor is the process-wide default one (default_monitor(): made on first
use over the GPUs this process measures, see process_layout()) unless a
monitor= is given. In a job launched by torchrun or Accelerate every GPU is
counted once: by default local rank 0 measures the GPUs of its node's ranks
and the other ranks measure nothing (their windows say measuring == False and
their energies are NaN); where each rank sees only its own GPU
(CUDA_VISIBLE_DEVICES per rank, or on AMD GPUs HIP_VISIBLE_DEVICES or
ROCR_VISIBLE_DEVICES) each rank measures that one.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import _joule

__all__ = [
    "PhaseMeter",
    "ProcessLayout",
    "Window",
    "default_monitor",
    "process_layout",
    "set_default_monitor",
    "window",
]

_lock = threading.Lock()
_default: Any = None  # a Monitor, or _NONE: this process measures nothing
_NONE = object()
_names = itertools.count(1)


# -- which GPUs this process measures -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProcessLayout:
    """Where this process sits in a launched job and what it measures.

    mode: "single" (not launched as a job of several processes: all GPUs),
    "node" (local rank 0 measures the GPUs of its node's ranks) or "rank"
    (each rank sees one GPU and measures it). gpus: the visible-device
    entries (or indices) this process measures, each vendor's GPUs numbered
    by its own runtime (vendor_index) as `joule measure --mpi` reads them:
    CUDA_VISIBLE_DEVICES's for NVIDIA GPUs as they are (indices or UUIDs),
    then the AMD GPUs that ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES leave
    (ROCR's list first, HIP's indices within it) written "amd:<entry>"; None:
    all (single), []: none. ranks_covered: how many ranks' GPUs this process
    measures (0: none).
    """

    mode: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    gpus: Optional[List[str]]
    ranks_covered: int

    @property
    def measuring(self) -> bool:
        return self.ranks_covered > 0


def process_layout(env: Optional[Mapping[str, str]] = None) -> ProcessLayout:
    """This process's layout from the launcher's environment (torchrun and
    Accelerate set WORLD_SIZE, RANK, LOCAL_RANK and LOCAL_WORLD_SIZE)."""
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1") or 1)
    rank = int(env.get("RANK", "0") or 0)
    local_rank = int(env.get("LOCAL_RANK", "0") or 0)
    local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)) or world)
    if world <= 1:
        return ProcessLayout("single", rank, world, local_rank, local_world, None, 1)
    entries = _visible_entries(env)
    if entries is not None and len(entries) < local_world:
        # Each rank was given its own GPU(s): measure what this rank sees (its first).
        return ProcessLayout("rank", rank, world, local_rank, local_world, entries[:1], 1 if entries else 0)
    if local_rank != 0:
        return ProcessLayout("node", rank, world, local_rank, local_world, [], 0)
    gpus = entries[:local_world] if entries is not None else [str(i) for i in range(local_world)]
    return ProcessLayout("node", rank, world, local_rank, local_world, gpus, local_world)


def _visible_entries(env: Mapping[str, str]) -> Optional[List[str]]:
    """The GPUs the variables in env restrict this process to, in the C++
    side's one list (joule.cluster_visible_gpus_of: CUDA_VISIBLE_DEVICES's
    entries, then "amd:<entry>" for the AMD GPUs ROCR_VISIBLE_DEVICES and
    HIP_VISIBLE_DEVICES leave), without the "nvidia:all" / "amd:all" it adds
    for a vendor left unrestricted: a rank's GPUs are those it was given.
    None where no variable is set. Raises UsageError for a HIP index past
    ROCR's list."""
    joined = _joule.cluster_visible_gpus_of(
        env.get("CUDA_VISIBLE_DEVICES"), env.get("HIP_VISIBLE_DEVICES"), env.get("ROCR_VISIBLE_DEVICES"))
    if joined is None:
        return None
    entries = [e.strip() for e in joined.split(",") if e.strip()]
    return [e for e in entries if e not in ("nvidia:all", "amd:all")]


@functools.lru_cache(maxsize=None)
def _synchronizer() -> Optional[Callable[[], None]]:
    # Once per process: whether torch and CUDA are there does not change, and
    # asking again cost every window edge an import and a device query.
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return lambda: torch.cuda.synchronize()


def make_monitor(
    backend: str = "auto",
    sim: str = "",
    interval_ms: float = 100.0,
    synchronize: bool = False,
    layout: Optional[ProcessLayout] = None,
):
    """A joule.Monitor over the GPUs this process measures (process_layout()),
    or None where it measures none. synchronize: every window edge waits for
    queued CUDA work (so kernels count in the window that launched them). Off
    by default: the callbacks open a window a step, and a wait at each step
    drains the queue the host keeps ahead of the GPU; joule.window and the
    callbacks wait once at their run's own edges instead (sync_cuda)."""
    layout = process_layout() if layout is None else layout
    if not layout.measuring:
        return None
    sync = _synchronizer() if synchronize else None
    if layout.gpus is None:
        return _joule.Monitor(backend, sim, [], interval_ms, sync)
    if all(g.isdigit() for g in layout.gpus):
        return _joule.Monitor(backend, sim, [int(g) for g in layout.gpus], interval_ms, sync)
    # UUIDs (or MIG names) in CUDA_VISIBLE_DEVICES, AMD GPUs ("amd:<index or
    # GPU-uuid>", numbered among AMD GPUs): as joule.distributed does.
    return _joule.cluster_monitor(backend, sim, list(layout.gpus), interval_ms)


def sync_cuda() -> None:
    """Waits for the GPU work queued so far (where torch and CUDA are present):
    what a run's first and last edges do, so the run's energy holds its
    kernels exactly while the edges between (a step's) stay free."""
    sync = _synchronizer()
    if sync is not None:
        sync()


def default_monitor():
    """The process-wide Monitor (made on first use with make_monitor()), or
    None where this process measures no GPU (a non-zero local rank)."""
    global _default
    with _lock:
        if _default is None:
            made = make_monitor()
            _default = _NONE if made is None else made
        return None if _default is _NONE else _default


def set_default_monitor(monitor) -> None:
    """Makes `monitor` the process-wide default (None: made again on next use)."""
    global _default
    with _lock:
        _default = monitor


def unique_name(base: str) -> str:
    return f"{base}#{next(_names)}"


# -- a window with running estimates -------------------------------------------------


class Window:
    """A window on a Monitor that can be read while it is open: what
    joule.window() and Monitor.window() both give.

    Open: energy_so_far_j (= energy_j), gpu_energy_j, elapsed_s and
    average_power_w are running estimates (the sampler's data so far, no
    waiting). After the with-block: the settled values (measurement waits up
    to settle_timeout_s, once, for the data that covers the end; settled()
    waits as long as it is told). Energies are the GPUs' (joules); the
    measurement has the CPU package and DRAM too.

    exact_name: the monitor's window is named `name` (Monitor.window()); else
    a unique name made from it (joule.window(), so that windows of one name
    may overlap). cuda_sync: wait for the CUDA work queued so far at each
    edge (joule.window()); Monitor.window() leaves its edges to the monitor's
    own synchronize, as the monitor was made.
    """

    def __init__(self, name: str = "window", monitor: Any = None, *, samples: Optional[float] = None,
                 tokens: Optional[float] = None, carbon: Any = None, trackers: Sequence[Any] = (),
                 step: Optional[int] = None, settle_timeout_s: float = 1.0, exact_name: bool = False,
                 cuda_sync: bool = True) -> None:
        self.name = name
        self.monitor = default_monitor() if monitor is None else monitor
        self.samples = samples
        self.tokens = tokens
        self.carbon = carbon
        self.trackers = list(trackers)
        self.step = step
        self.settle_timeout_s = settle_timeout_s
        self._window_name = name if exact_name else unique_name(name)
        self._cuda_sync = cuda_sync
        self._begin_s: Optional[float] = None
        self._ended: Any = None
        self._settle_tried = False  # measurement waits once

    @property
    def measuring(self) -> bool:
        """False on a rank that measures no GPU (its energies are NaN)."""
        return self.monitor is not None

    def __enter__(self) -> "Window":
        if self.monitor is not None:
            if self._cuda_sync:
                sync_cuda()
            self.monitor.begin_window(self._window_name)
            self._begin_s = self.monitor.clock_s()
        else:
            import time

            self._begin_s = time.monotonic()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.monitor is not None:
            if self._cuda_sync:
                sync_cuda()
            self._ended = self.monitor.end_window(self._window_name)
        else:
            import time

            self._ended = time.monotonic() - self._begin_s
        if self.trackers and exc_type is None:
            from .trackers import log_metrics

            log_metrics(self.trackers, self.metrics(), self.step if self.step is not None else 0)
        return False

    @property
    def open(self) -> bool:
        return self._begin_s is not None and self._ended is None

    @property
    def measurement(self):
        """The settled Measurement once the window has ended (None before, and
        on a rank that measures nothing)."""
        if self._ended is None or self.monitor is None:
            return None
        if not self._settle_tried:
            self.settled()
        return self._ended

    def settled(self, timeout_s: Optional[float] = None):
        """The ended window's Measurement, waiting up to timeout_s (default
        settle_timeout_s) for the data that covers its end; its .settled says
        whether it came. A UsageError before the window has ended."""
        if self._ended is None:
            raise _joule.UsageError(f"window '{self.name}' has not ended yet")
        if self.monitor is None:
            return None
        if not self._ended.settled:
            self._ended = self.monitor.settle(self._ended, self.settle_timeout_s if timeout_s is None else timeout_s)
        self._settle_tried = True
        return self._ended

    def _reading(self):
        """A Measurement: so far while open, settled after."""
        if self._begin_s is None:
            raise _joule.UsageError(f"window '{self.name}' has not begun")
        if self._ended is None:
            return self.monitor.measure_since(self._begin_s, self._window_name)
        return self.measurement

    @property
    def energy_so_far_j(self) -> float:
        """The GPUs' energy since the window began: a running estimate while it
        is open, the settled value after."""
        if self.monitor is None:
            if self._begin_s is None:
                raise _joule.UsageError(f"window '{self.name}' has not begun")
            return math.nan
        return self._reading().gpu_total_energy_j

    energy_j = energy_so_far_j

    @property
    def gpu_energy_j(self) -> List[float]:
        """Each GPU's energy (joules), in the monitor's order: running while
        open, settled after."""
        if self.monitor is None:
            return []
        return list(self._reading().gpu_energy_j)

    @property
    def elapsed_s(self) -> float:
        if self._begin_s is None:
            return 0.0
        if self.monitor is None:
            import time

            return (time.monotonic() - self._begin_s) if self._ended is None else self._ended
        if self._ended is None:
            return max(0.0, self.monitor.clock_s() - self._begin_s)
        return self._ended.elapsed_s

    @property
    def average_power_w(self) -> float:
        if self._ended is not None and self.monitor is not None:
            m = self.measurement
            return m.gpu_total_energy_j / m.elapsed_s if m.elapsed_s > 0 else math.nan
        if self.monitor is None:
            return math.nan
        m = self.monitor.measure_since(self._begin_s, self._window_name)
        return m.gpu_total_energy_j / m.elapsed_s if m.elapsed_s > 0 else math.nan

    def metrics(self, prefix: str = "joule/") -> Dict[str, float]:
        """The window's figures as flat metrics: energy_j, time_s, power_w,
        energy_per_sample_j / energy_per_token_j (with samples / tokens), and
        co2e_g and cost with a carbon= object."""
        energy = self.energy_so_far_j
        out = {f"{prefix}{self.name}_energy_j": energy, f"{prefix}{self.name}_time_s": self.elapsed_s,
               f"{prefix}{self.name}_power_w": self.average_power_w}
        if self.samples:
            out[f"{prefix}{self.name}_energy_per_sample_j"] = energy / self.samples
        if self.tokens:
            out[f"{prefix}{self.name}_energy_per_token_j"] = energy / self.tokens
        out.update(carbon_metrics(self.carbon, energy, f"{prefix}{self.name}_"))
        return out

    def __repr__(self) -> str:
        state = "open" if self.open else ("ended" if self._ended is not None else "not begun")
        return f"<joule.Window '{self.name}' {state}>"


def window(name: str = "window", monitor: Any = None, **options: Any) -> Window:
    """A joule.Window named `name` on `monitor` (default: default_monitor()).
    options: samples, tokens (for per-sample/per-token metrics), carbon (an
    object with .footprint(energy_j), e.g. joule.Carbon), trackers (logged
    to at exit, see joule.trackers), step, settle_timeout_s."""
    return Window(name, monitor, **options)


def carbon_metrics(carbon: Any, energy_j: float, prefix: str) -> Dict[str, float]:
    """co2e_g and cost from carbon.footprint(energy_j) (keys prefixed), or {}."""
    if carbon is None or energy_j is None or (isinstance(energy_j, float) and math.isnan(energy_j)):
        return {}
    fp = carbon.footprint(energy_j)
    out = {}
    if fp.get("co2e_g") is not None:
        out[f"{prefix}co2e_g"] = float(fp["co2e_g"])
    if fp.get("cost") is not None:
        out[f"{prefix}cost"] = float(fp["cost"])
    return out


# -- phases laid end to end -----------------------------------------------------------


@dataclasses.dataclass
class PhaseTotals:
    energy_j: float = 0.0
    time_s: float = 0.0
    windows: int = 0
    samples: float = 0.0
    tokens: float = 0.0
    unsettled: int = 0

    def add(self, energy_j: float, time_s: float, samples: float, tokens: float, settled: bool,
            windows: int = 1) -> None:
        """Adds `windows` windows' sums (one window by default)."""
        self.energy_j += energy_j
        self.time_s += time_s
        self.windows += windows
        self.samples += samples
        self.tokens += tokens
        self.unsettled += 0 if settled else windows

    def to_dict(self) -> Dict[str, float]:
        d = dataclasses.asdict(self)
        d["average_power_w"] = self.energy_j / self.time_s if self.time_s > 0 else 0.0
        if self.samples:
            d["energy_per_sample_j"] = self.energy_j / self.samples
        if self.tokens:
            d["energy_per_token_j"] = self.energy_j / self.tokens
        return d


@dataclasses.dataclass
class _Ended:
    """An ended outer window, until it settles."""
    phase: str
    measurement: Any  # what end_window returned
    samples: float
    tokens: float


class PhaseMeter:
    """Contiguous windows, one phase at a time ("train_step", "eval", "save",
    "other", ...), laid end to end, plus named outer windows (the run, epochs).

    switch(phase) ends the open phase and opens the next at the same instant,
    so the phases cover the run without gaps. A phase is only a span of the
    monitor's clock: switch() reads the clock (and, on a monitor made with
    synchronize=, waits as a window edge would) and nothing else, so a
    window a step costs two clock reads a step; the outer windows are real
    windows (anchored to the energy counter where the GPU allows) and keep
    the history the spans are computed from. Ended phases and windows settle
    lazily: poll() computes the pending ones from what the sampler holds (no
    waiting) and credits those whose data now covers their end; no hook ever
    waits, except finish(), which settles what is left.
    """

    def __init__(self, monitor: Any, tag: str = "joule") -> None:
        self.monitor = monitor
        self._tag = unique_name(tag)
        self._synchronize = monitor is not None and bool(getattr(monitor, "synchronizes", False))
        # Edges read time.monotonic() where the monitor's clock is it, offset: a
        # call into the module after a step of framework code costs 10-15 us.
        self._monotonic_offset_s = getattr(monitor, "monotonic_offset_s", None) if monitor is not None else None
        self._open: Optional[str] = None  # phase
        self._open_begin_s = 0.0
        # Ended phases, in order, not credited yet: (phase, begin_s, end_s, samples, tokens).
        self._spans: List[tuple] = []
        self._outer: List[_Ended] = []  # ended outer windows, in order, not credited yet
        self.totals: Dict[str, PhaseTotals] = {}
        self.interval: Dict[str, PhaseTotals] = {}
        self.last: Dict[str, Dict[str, float]] = {}  # phase -> the latest settled one (energy_j, time_s, samples, tokens)
        self.outer_open: Dict[str, str] = {}  # key -> window name
        self.outer_done: List[Dict[str, Any]] = []  # settled outer windows, in settling order
        self.outer_new: List[Dict[str, Any]] = []  # settled since take_outer()

    @property
    def measuring(self) -> bool:
        return self.monitor is not None

    @property
    def phase(self) -> Optional[str]:
        return self._open

    def switch(self, phase: Optional[str], samples: float = 0.0, tokens: float = 0.0,
               ended_as: Optional[str] = None) -> None:
        """Ends the open phase (credited with samples and tokens, and to
        phase ended_as if given: what it turned out to be) and opens one for
        `phase` (None: none)."""
        if self.monitor is None:
            self._open = phase
            return
        if self._synchronize:
            self.monitor.synchronize()
        offset_s = self._monotonic_offset_s
        now_s = time.monotonic() - offset_s if offset_s is not None else self.monitor.clock_s()
        if self._open is not None:  # a tuple: the cheapest record (this runs twice a step)
            self._spans.append((ended_as or self._open, self._open_begin_s, now_s, samples, tokens))
        self._open, self._open_begin_s = phase, now_s

    def begin_outer(self, key: str) -> None:
        if self.monitor is None or key in self.outer_open:
            return
        name = f"{self._tag}/outer/{key}"
        self.monitor.begin_window(name)
        self.outer_open[key] = name

    def end_outer(self, key: str, samples: float = 0.0, tokens: float = 0.0) -> None:
        name = self.outer_open.pop(key, None)
        if self.monitor is None or name is None:
            return
        self._outer.append(_Ended(key, self.monitor.end_window(name), samples, tokens))

    @property
    def _pending(self) -> list:
        """Ended phases and windows not credited yet."""
        return self._spans + self._outer

    def poll(self) -> None:
        """Credits the ended phases and windows whose data now covers their
        end. The data arrives in time order, so the phases settle in the
        order they ended: one call computes them up to the first still
        waiting, however many steps wait."""
        if self._spans:
            spans = self._spans
            energies = self.monitor.measure_spans([e[1] for e in spans], [e[2] for e in spans])
            self._credit_phases(spans, energies, True)
            del spans[:len(energies)]
        while self._outer:
            m = self.monitor.refresh(self._outer[0].measurement)
            if not m.settled:
                break
            self._credit_outer(self._outer.pop(0), m, True)

    def finish(self, timeout_s: float = 2.0) -> None:
        """Ends the open phase and outer windows and settles everything (waits
        up to timeout_s for the data that covers now)."""
        if self.monitor is None:
            self._open = None
            return
        self.switch(None)
        for key in list(self.outer_open):
            self.end_outer(key)
        # One window ending now, settled: the data then covers every end before it.
        name = f"{self._tag}/finish"
        self.monitor.begin_window(name)
        covered = self.monitor.settle(self.monitor.end_window(name), timeout_s).settled
        self.poll()
        if self._spans:  # the data did not come in time: credited as they are, unsettled
            self._credit_phases(self._spans, [self.monitor.measure_span(e[1], e[2]).gpu_total_energy_j
                                              for e in self._spans], False)
        for e in self._outer:
            m = self.monitor.refresh(e.measurement)
            self._credit_outer(e, m, covered and m.settled)
        self._spans, self._outer = [], []

    def _credit_outer(self, e: _Ended, m: Any, settled: bool) -> None:
        energy = m.gpu_total_energy_j
        record = {"name": e.phase, "energy_j": energy, "time_s": m.elapsed_s, "samples": e.samples,
                  "tokens": e.tokens, "settled": settled, "begin_s": m.begin_s,
                  "gpu_energy_j": list(m.gpu_energy_j), "cpu_energy_j": m.total_energy_j - energy}
        self.outer_done.append(record)
        self.outer_new.append(record)

    def _credit_phases(self, spans: List[tuple], energies: Sequence[float], settled: bool) -> None:
        """Credits spans[i] with energies[i] (the first len(energies) spans).
        A poll settles the tens of phases of the steps since the last one and
        this is the callbacks' per-step cost, so the spans are summed per
        phase first and the tables touched once per phase."""
        sums: Dict[str, list] = {}  # phase -> [energy_j, time_s, samples, tokens, windows, last span's energy_j, its span]
        for span, energy_j in zip(spans, energies):
            acc = sums.get(span[0])
            if acc is None:
                acc = sums[span[0]] = [0.0, 0.0, 0.0, 0.0, 0, 0.0, span]
            acc[0] += energy_j
            acc[1] += span[2] - span[1]
            acc[2] += span[3]
            acc[3] += span[4]
            acc[4] += 1
            acc[5], acc[6] = energy_j, span
        for phase, (energy_j, time_s, samples, tokens, windows, last_j, last) in sums.items():
            for table in (self.totals, self.interval):
                totals = table.get(phase)
                if totals is None:
                    totals = table[phase] = PhaseTotals()
                totals.add(energy_j, time_s, samples, tokens, settled, windows)
            self.last[phase] = {"energy_j": last_j, "time_s": last[2] - last[1], "samples": last[3], "tokens": last[4]}

    def take_interval(self) -> Dict[str, PhaseTotals]:
        """The phases' settled totals since the previous call."""
        out, self.interval = self.interval, {}
        return out

    def take_outer(self) -> List[Dict[str, Any]]:
        out, self.outer_new = self.outer_new, []
        return out

    @property
    def energy_j(self) -> float:
        """All settled phase windows' energy so far."""
        return sum(t.energy_j for t in self.totals.values())

    @property
    def time_s(self) -> float:
        return sum(t.time_s for t in self.totals.values())
