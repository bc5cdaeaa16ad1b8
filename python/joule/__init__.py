"""joule: measure and lower the energy of deep-learning training on GPUs.

    import joule
    monitor = joule.Monitor()                  # NVIDIA GPUs through NVML, else simulated ones
    with monitor.window("epoch") as w:
        train_one_epoch()
    print(w.measurement.total_energy_j, w.measurement.elapsed_s)

See joule.torch for PyTorch helpers, and joule.BatchSizeClient (joule.service)
for a client of the `joule serve` batch-size service.
"""
from ._joule import (  # noqa: F401
    BatchSizeOptimizer,
    DeviceError,
    Error,
    GpuEnergySource,
    Measurement,
    Monitor,
    PowerLimitOptimizer,
    UsageError,
    Window,
    devices,
)

__all__ = [
    "BatchSizeClient",
    "BatchSizeOptimizer",
    "DeviceError",
    "Error",
    "GpuEnergySource",
    "Measurement",
    "Monitor",
    "PowerLimitOptimizer",
    "ServiceError",
    "UsageError",
    "Window",
    "devices",
]

# Pure Python, imported on first use so that `import joule` costs nothing more.
_SERVICE_NAMES = ("BatchSizeClient", "ServiceError")


def __getattr__(name):
    if name in _SERVICE_NAMES:
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module 'joule' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_SERVICE_NAMES))
