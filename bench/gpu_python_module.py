#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Train a real model on the GPU with the joule Python module (read-only).

torchvision's ResNet-18 on synthetic 224x224 images: per-epoch energy from
joule.Monitor windows, the power-limit optimizer in observer mode through
joule.torch.TrainingCallbacks, and each epoch's energy compared with the NVML
energy counter read directly with pynvml around the same epoch.

  PYTHONPATH=build/python python3 bench/gpu_python_module.py
"""
import argparse
import time

import pynvml
import torch
import torchvision

import joule
import joule.torch


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=150)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()

    device = "cuda"
    model = torchvision.models.resnet18(num_classes=1000).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    monitor = joule.Monitor(gpus=[0], synchronize=joule.torch.synchronizer())
    print("joule sees:", monitor.gpus[0]["name"], "simulated" if monitor.simulated else "(NVML)")
    plo = joule.PowerLimitOptimizer(monitor, objective="cost", eta=0.5, observer=True, step_w=50,
                                    warmup_steps=5, measure_steps=10, job="resnet18", batch_size=args.batch)
    callbacks = joule.torch.TrainingCallbacks(plo)
    print(f"{'epoch':>5} {'time s':>8} {'joule J':>10} {'pynvml counter J':>17} {'diff %':>7}")
    for epoch in range(args.epochs):
        torch.cuda.synchronize()
        counter_before = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        with monitor.window("epoch") as w, callbacks.epoch():
            for _ in range(args.steps_per_epoch):
                with callbacks.step():
                    step()
                    torch.cuda.synchronize()
        counter_after = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        m = w.measurement
        counter_j = (counter_after - counter_before) / 1000.0
        print(f"{epoch:>5} {m.elapsed_s:>8.2f} {m.gpu_energy_j[0]:>10.1f} {counter_j:>17.1f} "
              f"{100 * (m.gpu_energy_j[0] / counter_j - 1):>+7.2f}")
    print(plo.report())


if __name__ == "__main__":
    main()
