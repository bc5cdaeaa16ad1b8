# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""DDP's gradient all-reduce as a concurrent region: a communication hook
that records its edges, then runs the all-reduce DDP would have run. DDP's
own all-reduce is recorded by a C++ hook built against this PyTorch at first
use (_native/comm_hook.cc); a hook of yours, or where no compiler is at hand,
by a Python one, which costs each DDP step 5-17%
(bench/README.md, sections 16e and 16i)."""
import hashlib
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

import torch

ALLREDUCE = "allreduce"  # the concurrent region of DDP's gradient all-reduce

_NATIVE_DIR = Path(__file__).resolve().parent / "_native"
_native_built: Any = None  # the extension module, or the exception its build raised


def native_comm_hook():
    """The C++ comm hook's extension, built against this PyTorch with
    torch.utils.cpp_extension (a C++ compiler and ninja; ~30 s the first
    time, then loaded from torch's extension cache, $TORCH_EXTENSIONS_DIR).
    Raises RuntimeError saying why it cannot be built; a failed build is
    not tried again in this process."""
    global _native_built
    if _native_built is None:
        try:
            _native_built = _build_native_comm_hook()
        except Exception as e:  # the compiler's, ninja's, the loader's: all say why
            _native_built = e
    if isinstance(_native_built, Exception):
        raise RuntimeError(f"joule.torch: the C++ comm hook cannot be built here: {_native_built}") from _native_built
    return _native_built


def _build_native_comm_hook():
    from torch.utils import cpp_extension

    if not torch.distributed.is_available():
        raise RuntimeError("this PyTorch has no torch.distributed")
    if not cpp_extension.is_ninja_available():
        raise RuntimeError("ninja is not on PATH (pip install ninja)")
    sources = [_NATIVE_DIR / "comm_hook.cc", _NATIVE_DIR / "concurrent_edges.h"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    name = f"joule_comm_hook_{digest}"  # a changed source builds anew, never over a loaded one
    build_dir = getattr(cpp_extension, "_get_build_directory", None)
    if build_dir is None or not any(Path(build_dir(name, False)).glob(f"{name}*.so")):
        print(f"joule.torch: building the all-reduce's C++ comm hook against torch {torch.__version__} "
              "(once; ~30 s)", file=sys.stderr, flush=True)
    return cpp_extension.load(name, [str(sources[0])], extra_include_paths=[str(_NATIVE_DIR)],
                              extra_cflags=["-O2"], verbose=bool(os.environ.get("JOULE_VERBOSE_BUILD")))


class _CommRecording:
    """Where a DDP model's comm hook records: the open session's edges
    (None between sessions: the hook then only communicates). native: the
    C++ hook's (joule._joule.ConcurrentEdges hands it the edges' C table)."""

    __slots__ = ("_edges", "_native")

    def __init__(self, native: Any = None) -> None:
        self._edges: Any = None
        self._native = native

    @property
    def native(self) -> bool:
        return self._native is not None

    @property
    def edges(self) -> Any:
        return self._edges

    @edges.setter
    def edges(self, edges: Any) -> None:
        if self._native is not None:
            from .. import _joule

            self._native.record_into(None if edges is None else _joule.ConcurrentEdges(edges))
        self._edges = edges


def register_comm_hook(ddp: "torch.nn.parallel.DistributedDataParallel", state: Any = None,
                       hook: Optional[Any] = None, native: Optional[bool] = None) -> _CommRecording:
    """Registers a DDP communication hook whose calls joule.torch.attribute
    sessions on `ddp` record as the concurrent region "allreduce" (one call
    per bucket per step). By default DDP's own all-reduce (divide by the
    group's size, sum on ddp.process_group), which leaves the gradients as
    DDP's built-in one, in C++ (native_comm_hook(): built at first use; with
    native=None a RuntimeWarning and the Python hook where it cannot be,
    native=True raises then). hook(state, bucket) -> Future[Tensor] is yours
    (register it through this instead of ddp.register_comm_hook to combine
    it with the recording; Python). DDP takes one hook, for good (it cannot
    be removed): outside a session it communicates and records nothing.
    attribute() calls this itself."""
    if getattr(ddp, "_joule_comm", None) is not None:
        raise RuntimeError("joule.torch.register_comm_hook: this DDP model has joule's comm hook already")
    if hook is not None and native:
        raise ValueError("joule.torch.register_comm_hook: native=True records DDP's own all-reduce, not a hook "
                         "of yours")
    if hook is None and native is not False:
        try:
            module = native_comm_hook()
        except RuntimeError as e:
            if native:
                raise
            warnings.warn(f"{e}; the all-reduce is recorded through a Python comm hook, which costs each DDP "
                          "step 5-17%", RuntimeWarning, stacklevel=2)
        else:
            recording = _CommRecording(module.Recording(ALLREDUCE))
            group = ddp.process_group if state is None else state
            module.register(ddp.reducer, group, recording._native)
            name_hook = getattr(getattr(ddp, "logger", None), "_set_comm_hook_name", None)
            if name_hook is not None:  # what DDP's logging data names
                name_hook("joule.torch allreduce (C++)")
            ddp._joule_comm = recording
            return recording
    return _register_python_hook(ddp, state, hook)


def _register_python_hook(ddp, state, hook) -> _CommRecording:
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
