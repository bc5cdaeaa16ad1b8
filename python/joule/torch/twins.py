# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Identical modules: fitted with one power, or a check on the fit.

Modules of one type with the same parameters, each called for the same GPU
time, do the same work: a GPT's blocks, the bottlenecks of one ResNet stage.
Fitted each on its own, neighbours far shorter than a sample take a fixed
pattern of errors (a GPT's eight blocks: +-8% around their mean, up to +23%,
where leave-one-out truths agree within ~2%); fitted with one power per phase
(same_power_groups, joule.attribute's same_power=), each is within 3% in the
median, 10% at worst (bench/README.md section 16k). Where they are fitted on
their own, how far their energies spread is an error of the fit on this very
model that needs no truth: each group gets a note with it (spread_notes)."""
import collections
import statistics
from typing import Callable, Dict, List, Sequence, Tuple

import torch

# Members whose GPU time a call is further than this from the group's median
# are left out of it: the same parameters on different inputs (another
# sequence length, a strided call) do different work, and take far longer or
# shorter. Identical work varies less: a GPT's last block's backward took 5%
# less than the median of the eight (7.85 ms against 8.27 ms; on two H200s).
GPU_TIME_TOLERANCE = 0.10
PHASES = ("forward", "backward")  # a module's regions: "<path>.forward", "<path>.backward"


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


def _same_time(items: list, time_s: Callable) -> list:
    """The items whose GPU time a call is within GPU_TIME_TOLERANCE of their median."""
    if not items:
        return []
    median_s = statistics.median(time_s(item) for item in items)
    return [item for item in items if abs(time_s(item) / median_s - 1.0) <= GPU_TIME_TOLERANCE]


def same_power_groups(intervals, groups: Sequence[Sequence[str]]) -> Dict[str, List[str]]:
    """joule.attribute's same_power= for identical modules: per group and
    phase, the regions of its modules recorded in that phase whose time a
    call is within GPU_TIME_TOLERANCE of their median, where two or more are.
    intervals: as RegionRecorder.intervals gives them."""
    time_s, calls = collections.defaultdict(float), collections.defaultdict(int)
    for name, begin_s, end_s, resumed, *_ in intervals:
        time_s[name] += end_s - begin_s
        calls[name] += not resumed
    out = {}
    for paths in groups:
        for phase in PHASES:
            names = [f"{path}.{phase}" for path in paths if calls.get(f"{path}.{phase}")]
            names = _same_time(names, lambda name: time_s[name] / calls[name])
            if len(names) >= 2:
                out[f"{names[0]} and {len(names) - 1} identical"] = names
    return out


# What a session's result says when it tied identical modules.
TIED_NOTE = ("identical modules (one type and parameters, the same GPU time a call) are fitted with one power per "
             "phase, so each is its own time at its group's power: fitted on their own, neighbours far shorter than "
             "a sample take a fixed pattern of errors (docs/attribution.md, 'Identical modules'); "
             "result(tie_identical=False) fits each on its own")


def untied(groups: Sequence[Sequence[str]], same_power: Dict[str, List[str]]) -> List[Sequence[str]]:
    """The groups none of whose modules' regions same_power ties."""
    tied = {name for names in same_power.values() for name in names}
    return [paths for paths in groups
            if not any(f"{path}.{phase}" in tied for path in paths for phase in PHASES)]


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
        parts = _same_time(parts, lambda p: p.gpu_time_s / p.calls)
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
