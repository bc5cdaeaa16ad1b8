#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.torch.LightningCallback inside a real PyTorch Lightning Trainer (CPU, simulated GPUs).

Run directly (exit status 0 = pass) or through test_lightning.py, which skips
when Lightning is not installed (Debian has no package for it).
"""
import os
import sys

os.environ.setdefault("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
os.environ.setdefault("JOULE_SIM", "count=1,load=1")

import torch

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

import joule
import joule.torch


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 2)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    data = torch.utils.data.TensorDataset(torch.randn(512, 16), torch.randint(0, 2, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    monitor = joule.Monitor(interval_ms=5)
    plo = joule.PowerLimitOptimizer(monitor, objective="energy", step_w=250, warmup_steps=1, measure_steps=3,
                                    min_warmup_s=0, min_measure_s=0)
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, callbacks=[joule.torch.LightningCallback(plo)])
    trainer.fit(Tiny(), loader)
    assert plo.state == "decided", plo.state
    assert len(plo.profile) == len(plo.candidate_limits_w) == 3
    print("lightning callback OK: chose", plo.chosen_limit_w, "W on", monitor.gpus[0]["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
