# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""DDP's gradient all-reduce as a concurrent region: a communication hook
that records its edges, then runs the all-reduce DDP would have run."""
from typing import Any, Optional

import torch

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
