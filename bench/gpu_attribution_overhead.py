#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What recording regions costs per training step on a real GPU, side by side
(docs/attribution.md, issue 32's overhead target: <= 3% of step time).
Read-only: changes no GPU setting.

torchvision's ResNet-50 on synthetic 224x224 images (bf16 autocast), and a
stack of Transformer encoder blocks on synthetic tokens. A/B blocks
interleaved in one run, so drift hits both alike: blocks of plain steps, and
blocks inside joule.torch.attribute(model, monitor, depth=D, optimizer=opt)
(forward and backward hooks on every module at that depth, the optimizer's
step), one monitor open throughout. The edges are host instants (the monitor
has no synchronize), what the hooks cost, not a CUDA sync per edge.
Median step time of each kind and the ratio.

  /tmp/joule-venv/bin/python bench/gpu_attribution_overhead.py --out overhead.json
(joule installed there first: bench/gpu_install.sh dist /tmp/joule-venv; locally PYTHONPATH=build/python)
"""
import argparse
import json
import statistics
import time

import torch
import torchvision

import joule
import joule.torch


def resnet50(batch):
    model = torchvision.models.resnet50(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    # Full backward hooks forbid an in-place op on a hooked module's output
    # (torch raises), and ResNet's ReLUs are in place: turned off here, for
    # both kinds of block alike (docs/attribution.md, limits).
    for module in model.modules():
        if getattr(module, "inplace", False):
            module.inplace = False
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    return model, x, y


def transformer(batch, layers=12, width=1024, tokens=512):
    layer = torch.nn.TransformerEncoderLayer(width, 16, 4 * width, batch_first=True, norm_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),
                                torch.nn.Flatten(1), torch.nn.LazyLinear(10)).cuda()
    x = torch.randn(batch, tokens, width, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    model(x)  # materialise the lazy layer
    return model, x, y


def steps(model, opt, x, y, n):
    """Median seconds per step over n steps, each timed to the end of its GPU work."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block", type=int, default=20, help="steps per block")
    parser.add_argument("--repeats", type=int, default=8, help="blocks of each kind")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    monitor = joule.Monitor(interval_ms=100)
    results = []
    for name, make, batch, depths in (("resnet50", resnet50, 128, (1, 2)), ("transformer", transformer, 16, (1, 2))):
        model, x, y = make(batch)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        steps(model, opt, x, y, 10)  # warm-up: cudnn's choices, the allocator
        for depth in depths:
            plain, recorded, regions = [], [], 0
            for _ in range(args.repeats):
                plain.append(steps(model, opt, x, y, args.block))
                with joule.torch.attribute(model, monitor, depth=depth, optimizer=opt) as session:
                    recorded.append(steps(model, opt, x, y, args.block))
                    regions = len(session.recorder.names)
            a, b = statistics.median(plain), statistics.median(recorded)
            row = {"model": name, "batch": batch, "depth": depth, "regions": regions, "plain_step_ms": 1e3 * a,
                   "recorded_step_ms": 1e3 * b, "overhead_percent": 100 * (b / a - 1)}
            results.append(row)
            print(f"{name:11s} batch {batch:3d} depth {depth}: {regions:4d} regions, step {1e3 * a:7.2f} ms plain, "
                  f"{1e3 * b:7.2f} ms recorded: {row['overhead_percent']:+.2f}%", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
