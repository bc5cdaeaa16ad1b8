# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Identical modules as a check on the fit that needs no truth.

Modules of one type with the same parameters, each called for the same GPU
time, do the same work: a GPT's blocks, the bottlenecks of one ResNet stage.
Their energies should agree, so how far the fit spreads them is an error of
the fit on this very model (on two H200s a GPT's eight blocks spread by
7-10% in training, where leave-one-out truths agree within a few percent:
bench/README.md section 16j). Each group gets a note with its spread."""
import statistics
from typing import Dict, List, Sequence, Tuple

import torch

# Members whose GPU time a call is further than this from the group's median
# are left out of it: the same parameters on different inputs (another
# sequence length, a strided call) do different work.
GPU_TIME_TOLERANCE = 0.05


def identical_modules(modules: Sequence[Tuple[str, "torch.nn.Module"]]) -> List[List[str]]:
    """Paths of modules with the same type and parameters (names, shapes,
    dtypes), in groups of two or more; modules without parameters are not
    grouped (a ReLU's work is its input's)."""
    groups: Dict[tuple, List[str]] = {}
    for path, module in modules:
        params = tuple((name, tuple(p.shape), p.dtype) for name, p in module.named_parameters())
        if params:
            groups.setdefault((type(module), params), []).append(path)
    return [paths for paths in groups.values() if len(paths) >= 2]


def _members(attribution, paths: Sequence[str]) -> list:
    """The group's parts, resolved and called: the modules' totals (forward
    and backward) where the session made them and two or more are resolved,
    else their forward regions."""
    totals = {t.name: t for t in attribution.totals}
    regions = {r.name: r for r in attribution.regions}
    for parts in ([totals.get(path) for path in paths], [regions.get(f"{path}.forward") for path in paths]):
        parts = [p for p in parts if p is not None and p.resolved and p.calls > 0]
        if len(parts) >= 2:
            return parts
    return []


def group_spreads(attribution, groups: Sequence[Sequence[str]]) -> List[Tuple[List[str], float]]:
    """Per group of identical modules with two or more resolved members of
    the same GPU time a call (within GPU_TIME_TOLERANCE of the median): the
    members' names and the relative standard deviation of their energies a
    call."""
    out = []
    for paths in groups:
        parts = _members(attribution, paths)
        if not parts:
            continue
        median_s = statistics.median(p.gpu_time_s / p.calls for p in parts)
        parts = [p for p in parts if abs(p.gpu_time_s / p.calls / median_s - 1.0) <= GPU_TIME_TOLERANCE]
        energies_j = [p.energy_per_call_j for p in parts]
        if len(parts) >= 2 and statistics.fmean(energies_j) > 0.0:
            out.append(([p.name for p in parts], statistics.stdev(energies_j) / statistics.fmean(energies_j)))
    return out


def spread_notes(attribution, groups: Sequence[Sequence[str]]) -> List[str]:
    """One note per group_spreads entry."""
    return [f"identical modules ({', '.join(names)}: one type and parameters, the same GPU time a call) do the "
            f"same work, yet their energies a call spread by {100 * spread:.1f}% (1 sigma): each one's figure may "
            f"be off by that much (docs/attribution.md, 'Identical modules')"
            for names, spread in group_spreads(attribution, groups)]
