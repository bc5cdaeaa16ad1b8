#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A real PyTorch training loop with joule's power-limit optimizer in OBSERVER mode.

Read-only: joule profiles the GPU's limits but never changes one, so every row
of the table is measured at the current limit. The script measures the
optimizer's overhead on step time by running the same loop without joule
before and after the instrumented stretch, and checks joule's energy for the
instrumented stretch against the GPU's energy counter read with pynvml.

  /tmp/joule-venv/bin/python bench/gpu_train_observer.py
--lib defaults to the libjoule_c.so of the installed joule package (on a GPU
machine: bench/gpu_install.sh dist /tmp/joule-venv first), else
build/lib/libjoule_c.so (a build here).
"""
import argparse
import ctypes
import importlib.util
import json
import os
import statistics
import time

import torch
import torch.nn as nn


def default_lib():
    """The C interface the installed joule package carries (joule/lib/libjoule_c.so), found
    without importing the package (its module would bring a second copy of joule's core into the
    process); else a build's, build/lib/libjoule_c.so."""
    spec = importlib.util.find_spec("joule")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "lib", "libjoule_c.so")
        if os.path.exists(path):
            return path
    return "build/lib/libjoule_c.so"


def load_joule(path):
    lib = ctypes.CDLL(path)
    lib.joule_session_open.restype = ctypes.c_void_p
    lib.joule_session_open.argtypes = [ctypes.c_char_p]
    lib.joule_session_close.argtypes = [ctypes.c_void_p]
    lib.joule_last_error.restype = ctypes.c_char_p
    for name in ("joule_on_epoch_begin", "joule_on_step_begin", "joule_on_step_end", "joule_on_epoch_end"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.joule_begin_window.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.joule_end_window.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.joule_power_limit_report.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    return lib


def model_and_step(device, batch):
    model = nn.Sequential(
        nn.Conv2d(3, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(256 * 16 * 16, 1000)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 64, 64, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    return step


def timed_steps(step, count, before=None, after=None):
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        if before:
            before()
        step()
        if after:
            after()
        times.append(time.perf_counter() - t0)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lib", default=None, help="libjoule_c.so (default: the installed joule package's)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--baseline-steps", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=400)
    parser.add_argument("--step-w", type=float, default=25.0, help="between candidate limits")
    parser.add_argument("--min-warmup-s", type=float, default=1.5, help="after each limit change")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = model_and_step(device, args.batch)
    timed_steps(step, 30)  # warm-up: kernels chosen, clocks up

    lib = load_joule(args.lib or default_lib())
    before = timed_steps(step, args.baseline_steps)

    options = {"interval_ms": 100, "power_limit": {
        "objective": "cost", "eta": 0.5, "observer": True, "warmup_steps": 5, "measure_steps": 20,
        "min_warmup_s": args.min_warmup_s, "step_w": args.step_w, "job": "observer-demo", "batch_size": args.batch}}
    session = lib.joule_session_open(json.dumps(options).encode())
    if not session:
        raise SystemExit("joule: " + lib.joule_last_error().decode())
    nvml = None
    try:
        import pynvml
        pynvml.nvmlInit()
        nvml = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as e:  # pynvml is only for the cross-check
        print("no pynvml cross-check:", e)
    counter_before = pynvml.nvmlDeviceGetTotalEnergyConsumption(nvml) if nvml else None
    lib.joule_begin_window(session, b"instrumented")
    instrumented = []
    for _ in range(args.epochs):
        lib.joule_on_epoch_begin(session)
        instrumented += timed_steps(step, args.steps_per_epoch,
                                    lambda: lib.joule_on_step_begin(session), lambda: lib.joule_on_step_end(session))
        lib.joule_on_epoch_end(session)
    out = ctypes.create_string_buffer(1 << 16)
    lib.joule_end_window(session, b"instrumented", out, len(out))
    counter_after = pynvml.nvmlDeviceGetTotalEnergyConsumption(nvml) if nvml else None
    window = json.loads(out.value.decode())
    state = lib.joule_power_limit_report(session, out, len(out))
    report = out.value.decode()
    lib.joule_session_close(session)

    after = timed_steps(step, args.baseline_steps)
    baseline = before + after
    print(report)
    print(f"profile complete: {state == 1}")
    print(f"device {torch.cuda.get_device_name(0) if device == 'cuda' else 'cpu'}, batch {args.batch}")
    print(f"step time without joule: mean {statistics.mean(baseline) * 1e3:.3f} ms "
          f"(before {statistics.mean(before) * 1e3:.3f}, after {statistics.mean(after) * 1e3:.3f}), "
          f"median {statistics.median(baseline) * 1e3:.3f} ms, n={len(baseline)}")
    print(f"step time with joule:    mean {statistics.mean(instrumented) * 1e3:.3f} ms, "
          f"median {statistics.median(instrumented) * 1e3:.3f} ms, n={len(instrumented)}")
    print(f"overhead: mean {100 * (statistics.mean(instrumented) / statistics.mean(baseline) - 1):+.3f}%, "
          f"median {100 * (statistics.median(instrumented) / statistics.median(baseline) - 1):+.3f}%")
    if counter_before is not None:
        counter_j = (counter_after - counter_before) / 1000.0
        print(f"energy of the instrumented stretch: joule {window['gpu_energy_j'][0]:.1f} J, "
              f"NVML counter via pynvml {counter_j:.1f} J "
              f"({100 * (window['gpu_energy_j'][0] / counter_j - 1):+.2f}%), {window['elapsed_s']:.1f} s")


if __name__ == "__main__":
    main()
