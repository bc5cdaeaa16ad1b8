# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Region edges on a clock: the GPU's (CUDA events mapped to the monitor's
clock through anchors, joule.GpuEdgeClock) or the host's, handed to a
joule.RegionRecorder."""
from typing import Any, List, Optional, Tuple

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
    """The CUDA calls the GPU clock makes, through torch.cuda.Event: where the
    CUDA runtime cannot be reached from C++ (cuda_runtime_events()). Tests
    hand the GPU clock a stand-in with the same methods."""

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


def cuda_runtime_events():
    """GPU events over the CUDA runtime PyTorch loaded, recorded from C++ on
    torch's current stream (joule.CudaRuntimeEvents: an edge costs one
    cudaEventRecord, not a torch.cuda.Event through Python). The stream comes
    from PyTorch's C shim where its libtorch_cuda has one (no Python per
    edge), else from torch._C._cuda_getCurrentRawStream. None where the
    runtime cannot be reached (then CudaEvents does the same through torch)."""
    from .. import _joule

    current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if current_stream is None or not torch.cuda.is_available():
        return None
    torch.cuda.init()  # loads the runtime
    try:
        return _joule.CudaRuntimeEvents()
    except _joule.DeviceError:
        pass
    try:
        return _joule.CudaRuntimeEvents(current_stream)
    except _joule.DeviceError:
        return None


def GpuClock(recorder, events: Optional[Any] = None, anchor_tries: int = 16, drain_every: int = 1024):
    """Region edges on the GPU's clock (joule.GpuEdgeClock): each edge
    records a CUDA event on the current stream (no sync), and flush() hands
    the edges to the joule.RegionRecorder at their GPU instants mapped to the
    monitor's clock.

    The mapping comes from anchors: with the GPU idle, an event is recorded
    between two reads of the monitor's clock, and the tightest bracket of a
    few tries places it (its half-width is the anchor's uncertainty,
    uncertainty_s). One anchor is taken when the clock is made, one at each
    flush(); an edge between two anchors is placed by the line through them,
    which also takes out the drift between the two clocks (drift_ppm). Each
    edge's GPU time is chained from the edge before it, so a long run loses no
    precision; events are pooled and reused every `drain_every` edges.

    begin_concurrent/end_concurrent record a concurrent region's call (work
    on another stream: an all-reduce) the same way, handed over at their own
    instants; end_before_last(name) ends `name` just before the last nested
    edge (found late). events: by default the CUDA runtime's, from C++
    (cuda_runtime_events()), else torch's (CudaEvents); or any object with
    CudaEvents' methods (the tests' stand-ins)."""
    from .. import _joule

    if events is None:
        events = cuda_runtime_events() or CudaEvents()
    return _joule.GpuEdgeClock(recorder, events, anchor_tries=anchor_tries, drain_every=drain_every)


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
