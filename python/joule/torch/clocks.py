# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Region edges on a clock: the GPU's (CUDA events mapped to the monitor's
clock through anchors) or the host's, handed to a joule.RegionRecorder."""
import bisect
import collections
import heapq
import math
from typing import Any, Dict, List, Optional, Tuple

import torch

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
