# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule: measure and lower the energy of deep-learning training on GPUs.

    import joule
    monitor = joule.Monitor()                  # NVIDIA GPUs through NVML, else simulated ones
    with monitor.window("epoch") as w:
        train_one_epoch()
    print(w.energy_j, w.elapsed_s, w.gpu_energy_j)       # settled GPU energy, time, per GPU

Energy per region of a training step (issue 32): joule.RegionRecorder marks
regions on a monitor's clock, joule.attribute(monitor, settled, recorder)
splits a window's energy among them (one joule.Attribution per GPU), and
joule.attribution formats the result (format_table, to_json);
joule.torch.attribute(model, monitor) records a model's modules.

Where training already happens (issue 33): joule.window("epoch") (running
estimates: w.energy_so_far_j), joule.hf.EnergyCallback (Hugging Face
Trainer), joule.lightning.EnergyCallback (Lightning), joule.trackers
(TensorBoard, MLflow, W&B); docs/integrations.md.

Carbon and cost: joule.Carbon(region="DE", pue=1.2).footprint(energy_j),
joule.carbon_regions() (the bundled grid-intensity table).

See joule.torch for PyTorch helpers, and joule.BatchSizeClient (joule.service)
for a client of the `joule serve` batch-size service.
"""
from ._joule import (  # noqa: F401
    Attribution,
    BatchSizeOptimizer,
    CudaRuntimeEvents,
    DeviceError,
    Error,
    GpuEdgeClock,
    GpuEnergySource,
    Measurement,
    Monitor,
    PowerLimitOptimizer,
    Region,
    RegionEnergy,
    RegionRecorder,
    SampleResponse,
    SampleResponseStore,
    UsageError,
    attribute_data,
    devices,
    fit_sample_response,
)
from ._carbon import Carbon, carbon_regions, carbon_table_path  # noqa: F401  (the packaged table first)
from ._joule import __version__  # noqa: F401  (the joule program's and the C++ library's)
from .meter import Window  # noqa: F401  (Monitor.window() and joule.window() both give one)
from .sample_response import attribute  # noqa: F401  (with the response kept for the GPU model and driver)

__all__ = [
    "Attribution",
    "BatchSizeClient",
    "BatchSizeOptimizer",
    "Carbon",
    "CudaRuntimeEvents",
    "DeviceError",
    "Error",
    "GpuEdgeClock",
    "GpuEnergySource",
    "Measurement",
    "Monitor",
    "PowerLimitOptimizer",
    "Region",
    "RegionEnergy",
    "RegionRecorder",
    "SampleResponse",
    "SampleResponseStore",
    "ServiceError",
    "UsageError",
    "Window",
    "attribute",
    "attribute_data",
    "carbon_regions",
    "carbon_table_path",
    "devices",
    "fit_sample_response",
]

# Pure Python, imported on first use so that `import joule` costs nothing more.
_SERVICE_NAMES = ("BatchSizeClient", "ServiceError")
# Submodules reachable as joule.<name> without importing them first (not in __all__).
_SUBMODULES = ("attribution", "hf", "lightning", "meter", "sample_response", "trackers")


def __getattr__(name):
    # joule.attribution (format_table, to_json): a submodule, not in __all__
    # (which lists the compiled module's names and the service's).
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module("." + name, __name__)
    if name == "window":  # joule.window("epoch"): joule.meter.window (issue 33)
        from .meter import window

        return window
    if name in _SERVICE_NAMES:
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module 'joule' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_SERVICE_NAMES) | set(_SUBMODULES) | {"window"})
