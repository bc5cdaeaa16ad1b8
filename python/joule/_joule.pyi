from typing import Callable, Optional, Sequence, Tuple

class Error(RuntimeError): ...
class UsageError(Error): ...
class DeviceError(Error): ...

def devices(backend: str = "auto", sim: str = "") -> dict: ...

class GpuEnergySource:
    @property
    def method(self) -> str: ...  # "power-samples" or "power-readings"
    calibration_scale: float

class Measurement:
    name: str
    begin_s: float
    elapsed_s: float
    settled: bool
    gpu_sources: list[GpuEnergySource]
    gpu_energy_j: list[float]
    cpu_package_energy_j: list[float]
    dram_energy_j: list[float]
    warnings: list[str]
    @property
    def gpu_total_energy_j(self) -> float: ...
    @property
    def total_energy_j(self) -> float: ...
    @property
    def end_s(self) -> float: ...

class Window:
    def __enter__(self) -> "Window": ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool: ...
    @property
    def measurement(self) -> Optional[Measurement]: ...
    def settled(self, timeout_s: float = 1.0) -> Measurement: ...

class Monitor:
    def __init__(
        self,
        backend: str = "auto",
        sim: str = "",
        gpus: Sequence[int] = ...,
        interval_ms: float = 100.0,
        synchronize: Optional[Callable[[], None]] = None,
    ) -> None: ...
    def begin_window(self, name: str) -> None: ...
    def end_window(self, name: str) -> Measurement: ...
    def settle(self, measurement: Measurement, timeout_s: float = 1.0) -> Measurement: ...
    def refresh(self, measurement: Measurement) -> Measurement: ...
    def end_window_settled(self, name: str, timeout_s: float = 1.0) -> Measurement: ...
    def window(self, name: str) -> Window: ...
    def write_timeline_csv(self, path: str) -> None: ...
    @property
    def gpus(self) -> list[dict]: ...
    @property
    def simulated(self) -> bool: ...

class PowerLimitOptimizer:
    def __init__(
        self,
        monitor: Monitor,
        objective: str = "cost",
        eta: float = 0.5,
        max_slowdown: float = 1.1,
        observer: bool = False,
        step_w: float = 25.0,
        warmup_steps: int = 5,
        measure_steps: int = 20,
        min_warmup_s: float = 1.0,
        min_measure_s: float = 2.0,
        job: str = "job",
        batch_size: int = 0,
        profile_path: str = "",
        reprofile: bool = False,
        # Start decided, without profiling: the limit to train at (what the
        # batch-size service advises), or rows measured before (as `profile`
        # gives them; steps and avg_power_w may be left out). Not both.
        known_limit_w: Optional[float] = None,
        known_profile: Optional[list[dict]] = None,
        # Called once with the measured rows (as `profile`) when profiling
        # here ends; what it raises comes out of on_step_end(). The optimizer
        # holds it where Python's collector cannot see: a callback that refers
        # to the optimizer should do so through a weakref.
        on_profiled: Optional[Callable[[list[dict]], None]] = None,
        # Noise: screening_rounds rounds of every limit name up to five
        # contenders, then confirming_rounds rounds of them and the limit in
        # force decide (the best of them against that limit), each
        # visit split in stretches_per_visit stretches; the choice leaves the
        # limit in force only on a difference significant at `confidence`.
        # confirming_rounds=0: one stage, decided on the screening rounds.
        # noise_aware=False: one round and the plain argmin.
        noise_aware: bool = True,
        screening_rounds: int = 3,
        confirming_rounds: int = 20,
        stretches_per_visit: int = 2,
        confidence: float = 0.95,
        # What to turn on every GPU: "power_limit", "sm_clock" or
        # "memory_clock" (clock caps from the highest supported clock down to
        # min_clock_fraction of it; SM caps one every step_mhz).
        knob: str = "power_limit",
        step_mhz: float = 90.0,
        min_clock_fraction: float = 0.5,
    ) -> None: ...
    def on_epoch_begin(self) -> None: ...
    def on_step_begin(self) -> None: ...
    def on_step_end(self) -> None: ...
    def on_epoch_end(self) -> None: ...
    def restore(self) -> None: ...
    def report(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def observer(self) -> bool: ...
    @property
    def chosen_limit_w(self) -> Optional[float]: ...  # None for a clock knob
    @property
    def knob(self) -> str: ...
    @property
    def chosen_setting(self) -> Optional[float]: ...  # in the knob's unit: W or MHz
    @property
    def candidates(self) -> list[float]: ...
    @property
    def candidate_limits_w(self) -> list[float]: ...
    @property
    def from_saved_profile(self) -> bool: ...
    @property
    def from_caller(self) -> bool: ...  # started from known_limit_w or known_profile
    @property
    def profile(self) -> list[dict]: ...

class BatchSizeOptimizer:
    def __init__(
        self,
        batch_sizes: Sequence[int],
        default_batch_size: int,
        beta: float = 2.0,
        window: Optional[int] = None,
        seed: int = 1,
    ) -> None: ...
    def predict(self) -> int: ...
    def observe(self, batch_size: int, cost: float, converged: bool) -> None: ...
    @property
    def early_stop_threshold_cost(self) -> float: ...
    @property
    def phase(self) -> str: ...
    @property
    def candidates(self) -> list[int]: ...
    def to_json(self) -> str: ...
    @staticmethod
    def from_json(text: str) -> "BatchSizeOptimizer": ...

# One job on many nodes (joule.distributed moves these between ranks).
def cluster_node_name(world_rank: int = -1) -> str: ...
def cluster_leader_message(
    monitor: Monitor,
    measurement: Measurement,
    node: str,
    ranks: Sequence[int],
    edge_wall_s: float,
    warnings: Sequence[str] = ...,
) -> str: ...
def cluster_job_gpus(visible_per_rank: Sequence[Optional[str]]) -> Optional[list[str]]: ...
def cluster_monitor(backend: str, sim: str, job_gpus: Sequence[str], interval_ms: float) -> Monitor: ...
def cluster_leader_error(node: str, error: str, edge_wall_s: float) -> str: ...
# outcomes: (leader's rank, node, its message or None, why there is none),
# in rank order. Returns (the report as a dict, the text report).
def cluster_report(
    window: str, world_size: int, outcomes: Sequence[Tuple[int, str, Optional[str], str]]
) -> Tuple[dict, str]: ...
