# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.torch.attribute: a model's modules (and the optimizer, the data
loading, DDP's all-reduce) as regions of a window, their edges on the GPU's
clock, and each region's energy from the fit."""
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import torch

from .clocks import GpuClock, HostClock
from .ddp import ALLREDUCE, _CommRecording, native_comm_hook, register_comm_hook
from .twins import TIED_NOTE, identical_modules, same_power_groups, spread_notes, untied

if TYPE_CHECKING:
    from .._joule import Monitor

_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict)


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

    Backward regions take one autograd hook per call: a pre-hook on the
    node that made the call's output (put on in its forward hook, so an
    in-place op after the module changes nothing) begins the call's backward
    when that output's gradient arrives, and the backward region open until
    then ends there. So in backward the regions follow each other with no gap:
    a module's backward lasts until the next hooked module's begins, and what
    autograd runs between them (a residual add's backward, a functional op
    between modules) counts to it; the last one ends when autograd has
    finished (a callback queued on its engine), parameter gradients included.
    A call whose forward returns no tensor requiring grad (a dict, a
    dataclass, a frozen layer's output) gets no backward region (its backward
    time counts to the region before it) and a line in notes. phases=False
    records forward regions only.

    The hooks are C++ objects (joule._joule.TorchHooks) that torch calls
    directly: an edge runs no Python of joule's, and with the default GPU
    clock it is C++ down to cudaEventRecord, on the stream PyTorch's C shim
    names.

    On exit every hook is removed and the optimizer's step restored; regions
    left open (an exception in forward) are closed. result(measurement,
    **options) calls joule.attribute with this session's recorder: one
    joule.Attribution per GPU.

    torch.distributed: with a DistributedDataParallel model (or ddp=, the
    DDP wrapping `model`), its modules are hooked by their paths in the
    wrapped module. Each bucket's gradient all-reduce is also recorded as
    a call of the concurrent region "allreduce" (it overlaps backward on its
    own stream; the fit takes the power it adds) through a comm hook DDP
    keeps for good: register_comm_hook, which this calls with DDP's own
    all-reduce unless you called it first. By default (allreduce=None) only
    through joule's C++ hook, built against your PyTorch at first use (~35 s
    once; +0.2% of a DDP step in the median round on two H200s, within the
    lease's noise: bench/README.md section 16i); where it cannot be built,
    not at all, with a note saying why.
    allreduce=True records it then through a Python hook (+5-17% of every
    later step, outside sessions too); allreduce=False never registers one.
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
                 allreduce: Optional[bool] = None, read_counter: bool = False) -> None:
        if depth < 0:
            raise ValueError("joule.torch.attribute: depth must be >= 0")
        if clock is None:
            clock = "gpu" if (events is not None or torch.cuda.is_available()) else "host"
        if clock not in ("gpu", "host"):
            raise ValueError(f"joule.torch.attribute: clock must be 'gpu' or 'host', not {clock!r}")
        if clock == "gpu" and events is None and not torch.cuda.is_available():
            raise ValueError("joule.torch.attribute: clock='gpu' needs CUDA (use clock='host')")
        from .. import RegionRecorder

        self.model = model
        if ddp is None and isinstance(model, torch.nn.parallel.DistributedDataParallel):
            ddp = model
        self.ddp = ddp
        self.allreduce = allreduce
        self.read_counter = read_counter
        self._reading_counter = False  # this session turned the monitor's every-step counter reads on
        self._root = model.module if model is ddp else model  # the user's module paths, not "module.*"
        self._comm: Optional[_CommRecording] = None  # while this session records the all-reduce
        self.monitor = monitor
        self.depth = depth
        self.phases = phases
        self.optimizer = optimizer
        self.clock = clock
        self.recorder = RegionRecorder(monitor)
        self.edges: Any = None  # GpuClock or HostClock, made on entry
        self._hooks: Any = None  # joule._joule.TorchHooks over the edges, made on entry: the nesting and the hooks
        self._events = events
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
        from .._joule import TorchHooks

        try:
            self.edges = GpuClock(self.recorder, events=self._events) if self.clock == "gpu" else HostClock(self.recorder)
            self._hooks = TorchHooks(self.edges, is_grad_enabled=torch.is_grad_enabled,
                                     graph_task=getattr(torch._C, "_current_graph_task_id", None),
                                     queue_callback=torch.autograd.Variable._execution_engine.queue_callback,
                                     tensor_type=torch.Tensor)
            for path, module in self.modules():
                self._hook(path, module)
            if self.optimizer is not None:
                self._wrap_step()
            if self.ddp is not None and self.allreduce is not False:
                self._record_allreduce()
            if self.read_counter:
                self.monitor.read_counter_every_step(True)
                self._reading_counter = True
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

    def result(self, measurement, tie_identical: bool = True, **options) -> list:
        """joule.attribute(monitor, measurement, recorder, **options): one
        joule.Attribution per GPU, with the sample response kept for this
        GPU model and driver where no sample model is given
        (joule.sample_response). Settle the measurement first. Unless
        totals= is given, each module recorded in both phases gets a total
        of its forward and backward (Attribution.totals, named by its path):
        its energy with the interval of the sum, which adding the two
        regions' intervals would not give. Identical modules (one type and
        parameters, the same GPU time a call) are fitted with one power per
        phase unless tie_identical=False or same_power= is given
        (joule.torch.twins); fitted on their own, they get a note with how
        far their energies spread."""
        from .. import attribute

        self.flush()
        options.setdefault("totals", self.module_totals())
        groups = identical_modules(self.modules())
        if tie_identical and "same_power" not in options:
            options["same_power"] = same_power_groups(
                self.recorder.intervals(measurement.begin_s, measurement.end_s), groups)
        attributions = attribute(self.monitor, measurement, self.recorder, **options)
        tied = options.get("same_power") or {}
        notes = [TIED_NOTE] if tied else []
        on_their_own = untied(groups, tied)
        for a in attributions:
            a.notes = list(a.notes) + notes + spread_notes(a, on_their_own)
        return attributions

    def module_totals(self) -> dict:
        """{path: [path.forward, path.backward]} for each module recorded in both phases."""
        return module_totals_of(self.recorder.names)

    # -- recording --------------------------------------------------------

    @property
    def notes(self) -> List[str]:
        """What the recording repaired or left out, one line each."""
        return list(self._hooks.notes) if self._hooks is not None else []

    def _note(self, key: str, text: str) -> None:
        self._hooks.note(key, text)

    def _begin(self, name: str) -> None:
        self._hooks.begin(name)

    def _end(self, name: str) -> None:
        self._hooks.end(name)

    def _hook(self, path: str, module: "torch.nn.Module") -> None:
        pre, post = self._hooks.forward_hooks(path, self.phases)  # C++: no Python frame of ours per edge
        self._handles.append(module.register_forward_pre_hook(pre))
        self._handles.append(module.register_forward_hook(post))

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
            if self.allreduce is None:  # the default: only at the C++ hook's cost
                try:
                    native_comm_hook()
                except RuntimeError as e:
                    self._note("allreduce", f"{ALLREDUCE}: not recorded: {e} (allreduce=True records it through a "
                               "Python comm hook, which costs each later DDP step 5-17%)")
                    return
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
        if self._reading_counter:
            self.monitor.read_counter_every_step(False)
            self._reading_counter = False
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
        if self._hooks is not None:
            self._hooks.close_all()


def module_totals_of(names) -> dict:
    """{path: [path.forward, path.backward]} for each path with both regions among `names` (a
    session's, or the names of stored intervals refitted offline), in the order of the forwards."""
    names = list(names)
    paths = [name[:-len(".forward")] for name in names if name.endswith(".forward")]
    return {path: [f"{path}.forward", f"{path}.backward"] for path in paths if f"{path}.backward" in names}


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
              allreduce: Optional[bool] = None, read_counter: bool = False) -> RegionAttribution:
    """Records a model's regions for energy attribution: a context manager
    (see RegionAttribution). phases=False records forward regions only;
    clock "gpu" (default with CUDA: CUDA events) or "host". A
    DistributedDataParallel model (or ddp=, the DDP wrapping `model`) is
    hooked by the wrapped module's paths, and its gradient all-reduce is
    recorded as the concurrent region "allreduce" through a C++ comm hook
    built at first use, which DDP keeps for good (allreduce=True: through a
    Python one where that cannot be built; False: never; see
    RegionAttribution and docs/attribution.md, "Concurrent regions").
    read_counter=True reads the energy counter once a step while the
    session records (Monitor.read_counter_every_step), and result() fits
    its increments with the samples."""
    return RegionAttribution(model, monitor, depth=depth, phases=phases, optimizer=optimizer, clock=clock, ddp=ddp,
                             allreduce=allreduce, read_counter=read_counter)
