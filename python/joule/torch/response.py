# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""measure_sample_response: how this GPU's power samples answer a step of
load, measured once with the monitor's own samples."""
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import torch

from .clocks import GpuClock
from .regions import RegionAttribution, attribute

if TYPE_CHECKING:
    from .._joule import Monitor

def measure_sample_response(monitor: "Monitor", seconds: float = 40.0, gpu: int = 0, seed: int = 1,
                            max_segment_ms: float = 40.0, raw: Optional[Dict[str, Any]] = None, keep: bool = True):
    """How this GPU's power samples respond to its power, for
    joule.attribute(sample_response=...) and RegionAttribution.result: the
    GPU alternates a memory-bound elementwise chain ("high", ~600 W on an
    H200 and steady: a matmul's power swings +-40 W under the power limit)
    and a near-idle spin for random lengths (1 ms to max_segment_ms each, so
    no period aliases with the sampling) for `seconds`, recorded on the GPU's
    clock, and joule.fit_sample_response fits the response lag by lag.
    Read-only: it only runs kernels. keep: the result is kept for the GPU's
    model and driver (joule.SampleResponseStore, joule.sample_response), and
    joule.attribute uses it there from then on, in any process; not on
    simulated GPUs. raw (a dict) receives the window's samples and segments
    for your own fits.
    """
    from .. import fit_sample_response
    from ..sample_response import keep_sample_response

    x = torch.ones(128 * 1024 * 1024, device=torch.device("cuda", gpu), dtype=torch.bfloat16)  # 256 MiB
    settled, recorder = alternate(monitor, lambda: x.mul_(0.999).add_(0.001), seconds, gpu, seed, max_segment_ms)
    if raw is not None:
        raw.update(begin_s=settled.begin_s, end_s=settled.end_s,
                   samples=monitor.observed_power(gpu, settled.begin_s, settled.end_s),
                   intervals=recorder.intervals(settled.begin_s, settled.end_s))
    response = fit_sample_response(monitor, settled, recorder, gpu=gpu)
    if keep:
        keep_sample_response(monitor, response, gpu=gpu)
    return response


def alternate(monitor: "Monitor", op: Callable[[], Any], seconds: float, gpu: int = 0, seed: int = 1,
              max_segment_ms: float = 40.0):
    """The window measure_sample_response fits: `op` back to back in a
    "high" region and a near-idle spin in a "low" one, each for random
    lengths (1 ms to max_segment_ms), for `seconds`, edges on the GPU's
    clock. Returns the settled measurement and the recorder. Public for
    probes of other loads (bench/probes/capped_response.py)."""
    import random
    import time

    from .. import RegionRecorder

    with torch.cuda.device(torch.device("cuda", gpu)):
        op_ms, cycles_per_ms = _time_kernels(op)
        rng = random.Random(seed)
        recorder = RegionRecorder(monitor)
        edges = GpuClock(recorder)
        with monitor.window("joule-sample-response") as w:
            until = time.perf_counter() + seconds
            while time.perf_counter() < until:
                edges.begin("high")
                for _ in range(max(1, round(rng.uniform(1, max_segment_ms) / op_ms))):
                    op()
                edges.end("high")
                edges.begin("low")
                torch.cuda._sleep(int(rng.uniform(1, max_segment_ms) * cycles_per_ms))
                edges.end("low")
            torch.cuda.synchronize()
        edges.flush()
    return w.settled(timeout_s=5.0), recorder


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
