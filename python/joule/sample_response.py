# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Measured sample responses kept per GPU model and driver
(joule.SampleResponseStore), and joule.attribute, which uses the one kept
for a monitor's GPUs where none is given.

    response = joule.torch.measure_sample_response(monitor)   # once per GPU model and driver: kept
    ...
    joule.attribute(monitor, settled, recorder)               # later, any process: uses it

A driver update may change how the driver samples: the response kept for
the old driver is not used, and a warning says to measure again. Simulated
GPUs keep none and use none.
"""
import datetime
import warnings
from typing import Optional, Tuple

from . import _joule

__all__ = ["attribute", "gpu_model", "keep_sample_response", "stored_sample_response"]

_BOXCAR_OPTIONS = ("sample_response", "sample_cover_ms", "sample_delay_ms")


def gpu_model(monitor, gpu: Optional[int] = None) -> Optional[Tuple[str, str]]:
    """(name, driver version) of the monitor's GPU `gpu`, or of all its GPUs
    where they are one model (gpu None); None on simulated GPUs, or on GPUs of
    several models."""
    if monitor.simulated:
        return None
    drivers = monitor.drivers
    gpus = monitor.gpus if gpu is None else [monitor.gpus[gpu]]
    models = {(g["name"], drivers["rocm_version" if g["backend"] == "rocm" else "driver_version"]) for g in gpus}
    return models.pop() if len(models) == 1 else None


def stored_sample_response(monitor, gpu: Optional[int] = None, store=None):
    """The response kept for the monitor's GPU model and driver (see
    gpu_model), or None. A kept file that is damaged, or one kept only for
    other drivers of this GPU, gives a RuntimeWarning saying so, and None."""
    model = gpu_model(monitor, gpu)
    if model is None:
        return None
    store = store or _joule.SampleResponseStore()
    try:
        response = store.load(*model)
    except _joule.UsageError as e:
        warnings.warn(f"joule: {e}: not used (measure it again: joule.torch.measure_sample_response)",
                      RuntimeWarning, stacklevel=3)
        return None
    if response is None:
        others = store.drivers_for(model[0])
        if others:
            warnings.warn(f"joule: a sample response is kept for {model[0]} with driver {', '.join(others)}, "
                          f"not with this one ({model[1]}), whose sampling may differ: measure it again "
                          "(joule.torch.measure_sample_response(monitor)); until then the samples' boxcar is fitted",
                          RuntimeWarning, stacklevel=3)
    return response


def keep_sample_response(monitor, response, gpu: int = 0, store=None) -> Optional[str]:
    """Keeps response for the model and driver of the monitor's GPU `gpu`;
    the file's path, or None on simulated GPUs (nothing kept)."""
    model = gpu_model(monitor, gpu)
    if model is None:
        return None
    store = store or _joule.SampleResponseStore()
    measured_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    store.save(model[0], model[1], response, measured_at)
    return store.path_for(*model)


def attribute(monitor, measurement, recorder, *args, stored_response: bool = True, **options):
    """joule._joule.attribute: a settled window's energy split among the
    recorder's regions, one joule.Attribution per GPU (its options as there).
    Where no sample model is given (sample_response, sample_cover_ms,
    sample_delay_ms) and stored_response is on, the response kept for the
    monitor's GPU model and driver is used (stored_sample_response; a note
    names its file); without one the samples' boxcar is fitted."""
    if stored_response and not args and all(options.get(k) is None for k in _BOXCAR_OPTIONS):
        response = stored_sample_response(monitor)
        if response is not None:
            options["sample_response"] = response
    return _joule.attribute(monitor, measurement, recorder, *args, **options)
