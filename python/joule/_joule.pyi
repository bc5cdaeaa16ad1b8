# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
from typing import Any, Callable, Optional, Sequence, Tuple

import joule.meter

__version__: str

class Error(RuntimeError): ...
class UsageError(Error): ...
class DeviceError(Error): ...

# backend: "auto", "nvml", "rocm" or "sim". The dict: gpu_backend ("nvml",
# "rocm", "nvml+rocm", "sim"), gpu_backend_reason, each driver library's
# fields (nvml_library, nvml_loaded, nvml_problem, driver_version,
# nvml_missing_functions; rocm_library, rocm_loaded, rocm_problem,
# rocm_version, rocm_missing_functions), simulated, control_path, gpus (each
# with backend and vendor_index, its number among its vendor's GPUs as
# CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES count them), cpu_zones,
# cpu_problems.
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

class Monitor:
    def __init__(
        self,
        backend: str = "auto",
        sim: str = "",
        gpus: Sequence[int] = ...,
        interval_ms: float = 100.0,
        synchronize: Optional[Callable[[], None]] = None,
    ) -> None: ...
    # How the monitor obtains GPU gpu's energy, in words.
    def energy_method(self, gpu: int) -> str: ...
    # While on (counted), the energy counter is read once a step on every
    # GPU pinned to its steps: joule.attribute fits its increments.
    def read_counter_every_step(self, on: bool) -> None: ...
    def begin_window(self, name: str) -> None: ...
    def end_window(self, name: str) -> Measurement: ...
    def settle(self, measurement: Measurement, timeout_s: float = 1.0) -> Measurement: ...
    def refresh(self, measurement: Measurement) -> Measurement: ...
    # The monitor's clock (Measurement.begin_s and end_s are on it).
    def clock_s(self) -> float: ...
    # The devices' energy from begin_s to now, computed like an ended window
    # without ending anything (no waiting, not settled): a running estimate
    # for a window still open (joule.window's energy_so_far_j).
    def measure_since(self, begin_s: float, name: str = "") -> Measurement: ...
    def measure_span(self, begin_s: float, end_s: float, name: str = "") -> Measurement: ...
    def measure_spans(self, begins_s: list[float], ends_s: list[float]) -> list[float]: ...
    @property
    def monotonic_offset_s(self) -> Optional[float]: ...
    @property
    def synchronizes(self) -> bool: ...
    def synchronize(self) -> None: ...
    def end_window_settled(self, name: str, timeout_s: float = 1.0) -> Measurement: ...
    # A joule.Window (python/joule/meter.py) named exactly `name`; options as joule.window's.
    def window(self, name: str = "window", **options: object) -> "joule.meter.Window": ...
    def write_timeline_csv(self, path: str) -> None: ...
    @property
    def gpus(self) -> list[dict]: ...
    @property
    def simulated(self) -> bool: ...
    # The driver libraries' fields, as in devices() (gpu_backend, nvml_*, rocm_*).
    @property
    def drivers(self) -> dict: ...
    # The power data a GPU's energy over [begin_s, end_s] comes from: (begin_s, end_s, power_w).
    def observed_power(self, gpu: int, begin_s: float, end_s: float) -> list[tuple[float, float, float]]: ...
    # The energy counter's values read within the span: (time_s, energy_j), each at the step it shows.
    def counter_values(self, gpu: int, begin_s: float, end_s: float) -> list[tuple[float, float]]: ...
    # Simulated GPUs only (backend="sim"): the load (0 to 1) of one GPU, or of all (gpu None), from now on.
    def set_simulated_load(self, load: float, gpu: Optional[int] = None) -> None: ...

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
def cluster_visible_gpus() -> Optional[str]: ...
def cluster_visible_gpus_of(cuda_visible: Optional[str], hip_visible: Optional[str],
                            rocr_visible: Optional[str]) -> Optional[str]: ...
def cluster_job_gpus(visible_per_rank: Sequence[Optional[str]]) -> Optional[list[str]]: ...
def cluster_monitor(backend: str, sim: str, job_gpus: Sequence[str], interval_ms: float) -> Monitor: ...
def cluster_leader_error(node: str, error: str, edge_wall_s: float) -> str: ...
# outcomes: (leader's rank, node, its message or None, why there is none),
# in rank order. Returns (the report as a dict, the text report).
def cluster_report(
    window: str, world_size: int, outcomes: Sequence[Tuple[int, str, Optional[str], str]]
) -> Tuple[dict, str]: ...

# Energy per region of a training step (issue 32).
class Region:
    def __enter__(self) -> "Region": ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool: ...
    @property
    def name(self) -> str: ...

class RegionRecorder:
    # On the monitor's clock; its edges call the monitor's synchronize, if any.
    def __init__(self, monitor: Monitor) -> None: ...
    # Now, or at at_s on clock_s()'s clock (an instant measured elsewhere, e.g. a CUDA event's).
    # concurrent=True: a call of a concurrent region (work on another stream, e.g. an all-reduce):
    # beside the nesting, its edges in any order, several calls open at once.
    def begin(self, name: str, at_s: Optional[float] = None, concurrent: bool = False) -> None: ...
    # Must name the innermost open region (UsageError otherwise); concurrent=True ends the
    # earliest open call of that concurrent region.
    def end(self, name: str, at_s: Optional[float] = None, concurrent: bool = False) -> None: ...
    def clock_s(self) -> float: ...
    def region(self, name: str) -> Region: ...
    # The recorded pieces within [begin_s, end_s]: (name, begin_s, end_s, resumed).
    def intervals(self, begin_s: float, end_s: float) -> list[tuple[str, float, float, bool]]: ...
    @property
    def names(self) -> list[str]: ...  # in order of first use
    @property
    def open_regions(self) -> int: ...  # nested
    @property
    def open_concurrent_calls(self) -> int: ...
    @property
    def concurrent_regions(self) -> list[str]: ...  # the names recorded as concurrent
    @property
    def synchronized(self) -> bool: ...

class CudaRuntimeEvents:
    # Events over the CUDA runtime this process loaded (PyTorch's), each recorded from C++ on
    # PyTorch's current stream: from its C shim (current_stream None) or current_stream(device)
    # (a stream handle, e.g. torch._C._cuda_getCurrentRawStream). DeviceError where no CUDA
    # runtime is loaded, or with None where the shim is not.
    def __init__(self, current_stream: Optional[Callable[[int], int]] = None) -> None: ...
    @property
    def runtime_path(self) -> str: ...
    @property
    def stream_source(self) -> str: ...
    @staticmethod
    def loaded_runtime() -> Optional[str]: ...

class GpuEdgeClock:
    # A RegionRecorder's edges as GPU events (a CudaRuntimeEvents, or an object with new(),
    # record(e), done(e), elapsed_s(a, b), synchronize()); flush() maps them onto its clock.
    def __init__(self, recorder: RegionRecorder, events: Any, anchor_tries: int = 16,
                 drain_every: int = 1024) -> None: ...
    def begin(self, name: str) -> None: ...
    def end(self, name: str) -> None: ...
    def begin_concurrent(self, name: str) -> None: ...
    def end_concurrent(self, name: str) -> None: ...
    # Ends name just before the last nested edge (found late); False if none is left to move.
    def end_before_last(self, name: str) -> bool: ...
    def flush(self) -> None: ...
    @property
    def uncertainty_s(self) -> float: ...
    @property
    def drift_ppm(self) -> float: ...
    @property
    def reordered_edges(self) -> int: ...

class RegionEnergy:
    @property
    def name(self) -> str: ...
    @property
    def concurrent(self) -> bool: ...  # recorded as concurrent: power_w is the power it adds
    @property
    def calls(self) -> int: ...
    @property
    def gpu_time_s(self) -> float: ...  # concurrent: the time any of its calls ran
    @property
    def resolved(self) -> bool: ...  # False: powers and interval NaN, energy at the baseline power (concurrent: 0 J)
    @property
    def power_w(self) -> float: ...  # while it runs, baseline included (concurrent: the power it adds)
    @property
    def power_above_baseline_w(self) -> float: ...
    @property
    def energy_j(self) -> float: ...
    @property
    def energy_per_call_j(self) -> float: ...
    @property
    def share(self) -> float: ...  # of the window's energy (0..1)
    @property
    def energy_low_j(self) -> float: ...  # NaN where not computed
    @property
    def energy_high_j(self) -> float: ...
    @property
    def energy_std_j(self) -> float: ...
    def to_dict(self) -> dict: ...

class Attribution:
    @property
    def regions(self) -> list[RegionEnergy]: ...
    @property
    def baseline_w(self) -> float: ...
    @property
    def baseline_low_w(self) -> float: ...
    @property
    def baseline_high_w(self) -> float: ...
    @property
    def baseline_estimated(self) -> bool: ...
    @property
    def baseline_separated(self) -> bool: ...
    @property
    def idle_time_s(self) -> float: ...
    @property
    def idle_energy_j(self) -> float: ...
    @property
    def window_energy_j(self) -> float: ...
    @property
    def model_energy_j(self) -> float: ...
    @property
    def scale(self) -> float: ...
    @property
    def observations(self) -> int: ...
    @property
    def residual_rms_w(self) -> float: ...
    @property
    def notes(self) -> list[str]: ...
    # Plain dicts, lists and floats (NaN kept), for json.dumps.
    def to_dict(self) -> dict: ...

# A settled window's energy split among the recorder's regions and the idle
# time, one Attribution per GPU. Raises UsageError (unsettled window, ...).
def attribute(
    monitor: Monitor,
    measurement: Measurement,
    recorder: RegionRecorder,
    baseline_w: Optional[float] = None,
    bootstrap_rounds: int = 200,
    confidence: float = 0.9,
    block_s: float = 1.0,
    seed: int = 1,
    sample_cover_ms: Optional[float] = None,
    sample_delay_ms: Optional[float] = None,
    sample_response: Optional[SampleResponse] = None,
    counter_increments: bool = True,
    counter_lag_ms: Optional[float] = None,
    model_bias: Optional[float] = None,
) -> list[Attribution]: ...

# attribute() from data kept from a run (e.g. to refit it offline): samples
# as Monitor.observed_power gives them, counter as Monitor.counter_values,
# intervals as RegionRecorder.intervals (a fifth element True: concurrent).
def attribute_data(
    samples: list[tuple[float, float, float]],
    counter: list[tuple[float, float]],
    intervals: list[tuple],
    begin_s: float,
    end_s: float,
    energy_j: float,
    baseline_w: Optional[float] = None,
    bootstrap_rounds: int = 200,
    confidence: float = 0.9,
    block_s: float = 1.0,
    seed: int = 1,
    sample_cover_ms: Optional[float] = None,
    sample_delay_ms: Optional[float] = None,
    sample_response: Optional[SampleResponse] = None,
    counter_increments: bool = True,
    counter_lag_ms: Optional[float] = None,
    model_bias: Optional[float] = None,
) -> Attribution: ...

# How a GPU's power samples respond to its power (joule.torch.measure_sample_response runs the window).
class SampleResponse:
    def __init__(
        self,
        response_ms: Sequence[float],
        first_lag_ms: int = 0,
        rounds: Sequence[Sequence[float]] = ...,
        rounds_first_lag_ms: int = 0,
    ) -> None: ...
    @property
    def response_ms(self) -> list[float]: ...  # newest first, from first_lag_ms before the stamp
    @property
    def first_lag_ms(self) -> int: ...
    @property
    def low_w(self) -> float: ...
    @property
    def high_w(self) -> float: ...
    @property
    def residual_rms_w(self) -> float: ...
    @property
    def samples(self) -> int: ...
    @property
    def lag10_ms(self) -> float: ...
    @property
    def lag50_ms(self) -> float: ...
    @property
    def lag90_ms(self) -> float: ...
    @property
    def smoothing(self) -> float: ...
    @property
    def rounds(self) -> list[list[float]]: ...
    @property
    def rounds_first_lag_ms(self) -> int: ...
    def to_dict(self) -> dict: ...

def fit_sample_response(
    monitor: Monitor,
    measurement: Measurement,
    recorder: RegionRecorder,
    gpu: int = 0,
    region: str = "high",
    min_lag_ms: int = -20,
    max_lag_ms: int = 60,
) -> SampleResponse: ...

# The HTML page of a window's attribution (joule.attribution.to_html writes it).
def attribution_page(title: str, attributions: list[Attribution], gpu_labels: list[str] = ...) -> str: ...

# Carbon and cost (issue 33): g CO2e = kWh x g_per_kwh x pue; cost = kWh x pue x price_per_kwh.
class Carbon:
    def __init__(
        self,
        region: Optional[str] = None,
        g_per_kwh: Optional[float] = None,
        pue: float = 1.0,
        price_per_kwh: Optional[float] = None,
        currency: str = "",
        table: Optional[str] = None,
    ) -> None: ...
    # keys: energy_kwh, co2e_g, cost, currency, g_per_kwh, pue, region, source, year
    def footprint(self, energy_j: float) -> dict: ...
    @property
    def g_per_kwh(self) -> Optional[float]: ...
    @property
    def pue(self) -> float: ...
    @property
    def price_per_kwh(self) -> Optional[float]: ...
    @property
    def currency(self) -> str: ...
    @property
    def region(self) -> Optional[str]: ...
    @property
    def region_name(self) -> Optional[str]: ...
    @property
    def source(self) -> Optional[str]: ...
    @property
    def year(self) -> Optional[int]: ...

# The table of average grid intensity: dicts with kind, code, alpha2, name, country_iso3, g_per_kwh, year, source.
def carbon_regions(table: Optional[str] = None) -> list[dict]: ...
# The grid-intensity table joule.Carbon reads, by the one search order: table,
# $JOULE_CARBON_TABLE, $JOULE_DATA_DIR, the package's own copy, the program's share/joule, the source tree.
def carbon_table_path(table: Optional[str] = None) -> str: ...
def _set_package_share_dir(dir: str) -> None: ...
