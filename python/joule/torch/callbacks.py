# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The power-limit optimizer's callbacks around a plain training loop or a
PyTorch Lightning Trainer, and the synchronize a Monitor takes."""
import contextlib

import torch

def synchronizer(device=None):
    """A callable that waits for queued CUDA work, or None without CUDA.

    Pass it as Monitor(synchronize=...) so kernels count in the window that
    launched them.
    """
    if not torch.cuda.is_available():
        return None
    return lambda: torch.cuda.synchronize(device)


class TrainingCallbacks:
    """Calls the optimizer's callbacks around epochs and steps of a plain loop."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    @contextlib.contextmanager
    def epoch(self):
        self.optimizer.on_epoch_begin()
        try:
            yield
        finally:
            self.optimizer.on_epoch_end()

    @contextlib.contextmanager
    def step(self):
        self.optimizer.on_step_begin()
        yield
        self.optimizer.on_step_end()


try:  # Lightning is optional
    try:
        from lightning.pytorch.callbacks import Callback as _LightningCallbackBase
    except ImportError:
        from pytorch_lightning.callbacks import Callback as _LightningCallbackBase
except ImportError:
    _LightningCallbackBase = None

if _LightningCallbackBase is not None:

    class LightningCallback(_LightningCallbackBase):
        """PyTorch Lightning callback driving a joule.PowerLimitOptimizer."""

        def __init__(self, optimizer):
            super().__init__()
            self.optimizer = optimizer

        def on_train_epoch_start(self, trainer, pl_module):
            self.optimizer.on_epoch_begin()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.optimizer.on_step_begin()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.optimizer.on_step_end()

        def on_train_epoch_end(self, trainer, pl_module):
            self.optimizer.on_epoch_end()

        def on_train_end(self, trainer, pl_module):
            self.optimizer.restore()
