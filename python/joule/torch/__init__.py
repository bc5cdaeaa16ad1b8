# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""PyTorch helpers on top of the joule module.

    import joule, joule.torch
    monitor = joule.Monitor(synchronize=joule.torch.synchronizer())
    plo = joule.PowerLimitOptimizer(monitor, objective="cost", eta=0.5)
    callbacks = joule.torch.TrainingCallbacks(plo)
    for epoch in range(epochs):
        with callbacks.epoch():
            for batch in loader:
                with callbacks.step():
                    train_step(batch)

With PyTorch Lightning installed, joule.torch.LightningCallback(plo) plugs the
same optimizer into a Trainer: Trainer(callbacks=[joule.torch.LightningCallback(plo)]).

joule.torch.BatchSizeRecurrence(client, job, monitor=monitor) runs one
recurrence of a job on a `joule serve` batch-size service (see its docstrin

The package, by concern: callbacks (the optimizer around a loop or a
Lightning Trainer, synchronizer), clocks (region edges on the GPU's or the
host's clock), regions (attribute: a model's modules as regions), response
(measure_sample_response), ddp (the all-reduce as a region). The recurrence
itself (BatchSizeRecurrence) needs no torch: it lives in joule.recurrence,
beside the service's client, and is named here as before.
"""
from ..recurrence import BatchSizeRecurrence  # noqa: F401
from .callbacks import TrainingCallbacks, synchronizer  # noqa: F401
from .clocks import CudaEvents, GpuClock, HostClock  # noqa: F401
from .ddp import ALLREDUCE, native_comm_hook, register_comm_hook  # noqa: F401
from .regions import RegionAttribution, attribute  # noqa: F401
from .response import measure_sample_response  # noqa: F401

try:
    from .callbacks import LightningCallback  # noqa: F401  (with PyTorch Lightning installed)
except ImportError:
    pass
