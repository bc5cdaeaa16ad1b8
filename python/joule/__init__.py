"""joule: measure and lower the energy of deep-learning training on GPUs.

    import joule
    monitor = joule.Monitor()                  # NVIDIA GPUs through NVML, else simulated ones
    with monitor.window("epoch") as w:
        train_one_epoch()
    print(w.measurement.total_energy_j, w.measurement.elapsed_s)

See joule.torch for PyTorch helpers.
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
    "BatchSizeOptimizer",
    "DeviceError",
    "Error",
    "GpuEnergySource",
    "Measurement",
    "Monitor",
    "PowerLimitOptimizer",
    "UsageError",
    "Window",
    "devices",
]
