# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Identical modules (joule.torch.twins): a session's result fits modules
that do the same work with one power per phase, or, asked not to, notes how
far their energies spread; on simulated GPUs with host edges and CPU torch."""
import re
import statistics
import time

import pytest
import torch

import joule
import joule.attribution
import joule.torch
from joule.torch.twins import TIED_NOTE, identical_modules, same_power_groups, spread_notes, untied


class _SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class Sleepy(torch.nn.Module):
    """A linear layer whose call lasts `seconds` of host time, forward and backward."""

    def __init__(self, width, seconds):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.seconds = seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return _SlowBackward.apply(self.linear(x), self.seconds)


@pytest.fixture
def monitor(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")  # GPUs only
    return joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)


def test_modules_of_one_type_and_parameters_are_grouped():
    a, b, wide, relu = Sleepy(8, 0.0), Sleepy(8, 0.0), Sleepy(16, 0.0), torch.nn.ReLU()
    c = Sleepy(8, 0.0).to(torch.float64)  # the same shapes in another dtype: other work
    groups = identical_modules([("a", a), ("relu", relu), ("b", b), ("wide", wide), ("c", c),
                                ("relu2", torch.nn.ReLU())])
    assert groups == [["a", "b"]]
    assert identical_modules([("a", a), ("wide", wide)]) == []


def trained_session(monitor):
    """Three identical modules, one with their parameters that takes three
    times as long, another type: 20 training steps in a session."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(Sleepy(16, 0.01), Sleepy(16, 0.01), Sleepy(16, 0.01),
                                Sleepy(16, 0.03),  # the same parameters, three times the time: left out
                                torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    with joule.torch.attribute(model, monitor, optimizer=opt, clock="host") as session:
        with monitor.window("train") as w:
            for _ in range(20):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
    return session, monitor.settle(w.measurement, timeout_s=5.0)


def test_a_session_fits_identical_modules_with_one_power_per_phase(monitor):
    session, settled = trained_session(monitor)
    [a] = session.result(settled, bootstrap_rounds=0)
    assert TIED_NOTE in a.notes
    assert not any("spread by" in n for n in a.notes), "no spread: they share a power"
    regions = {r.name: r for r in a.regions}
    for phase in ("forward", "backward"):
        [group] = [n for n in a.notes if re.match(rf"\d regions fitted with one power, group '[0-2]\.{phase}", n)]
        members = re.search(r"\(([^)]*)\): each", group).group(1).split(", ")
        # Not 3 (its calls last longer), nor 4 (another type); 0, 1 and 2 unless
        # a loaded machine stretched one's calls by more than 10%.
        assert len(members) >= 2 and set(members) <= {f"{k}.{phase}" for k in range(3)}, group
        assert len({regions[m].power_w for m in members}) == 1
    # Asked not to: each on its own, and the spread noted.
    [own] = session.result(settled, bootstrap_rounds=0, tie_identical=False)
    assert TIED_NOTE not in own.notes and not any("fitted with one power" in n for n in own.notes)


def test_same_power_groups_take_each_phase_of_modules_called_for_the_same_time():
    intervals = [("a.forward", 0.0, 1.0, False), ("b.forward", 1.0, 2.04, False), ("c.forward", 2.0, 3.2, False),
                 ("a.backward", 3.0, 3.5, False), ("a.backward", 3.6, 4.0, True),  # resumed: one call of 0.9 s
                 ("b.backward", 4.0, 4.9, False), ("d.forward", 5.0, 6.0, False)]
    assert same_power_groups(intervals, [["a", "b", "c"], ["d", "e"]]) == {
        "a.forward and 1 identical": ["a.forward", "b.forward"],  # c's 1.2 s is 20% longer
        "a.backward and 1 identical": ["a.backward", "b.backward"],
    }  # d's twin never ran: no group
    assert untied([["a", "b", "c"], ["d", "e"]], same_power_groups(intervals, [["a", "b", "c"]])) == [["d", "e"]]


def test_a_session_notes_how_far_identical_modules_energies_spread(monitor):
    session, settled = trained_session(monitor)
    a = session.result(settled, bootstrap_rounds=0, tie_identical=False)[0]
    [note] = [n for n in a.notes if n.startswith("identical modules")]
    members = re.match(r"identical modules \(([^:]*):", note).group(1).split(", ")
    # Not 3 (its calls last longer), nor 4 (another type); 0, 1 and 2 unless
    # a loaded machine stretched one's calls by more than 10%.
    assert len(members) >= 2 and set(members) <= {"0", "1", "2"}, note
    totals = {t.name: t for t in a.totals}
    energies_j = [totals[name].energy_per_call_j for name in members]
    spread = statistics.stdev(energies_j) / statistics.fmean(energies_j)
    assert float(re.search(r"spread by ([0-9.]+)%", note).group(1)) == pytest.approx(100 * spread, abs=0.05)
    # The note reaches what users read: the table and the JSON.
    assert note in joule.attribution.format_table(a)
    assert note in joule.attribution.to_json([a])
    # Without totals the forward regions are compared.
    [plain] = session.result(settled, bootstrap_rounds=0, totals=None, tie_identical=False)
    assert any(re.match(r"identical modules \([0-2]\.forward, [0-2]\.forward", n) for n in plain.notes), plain.notes


def test_no_note_without_identical_modules():
    groups = identical_modules([("a", torch.nn.Linear(4, 4)), ("b", torch.nn.Linear(4, 8))])

    class Part:
        def __init__(self, name, energy_j, seconds):
            self.name, self.resolved, self.calls = name, True, 10
            self.energy_per_call_j, self.gpu_time_s = energy_j, 10 * seconds

    class Result:
        regions = [Part("a.forward", 1.0, 0.001), Part("b.forward", 2.0, 0.002)]
        totals = []

    assert groups == [] and spread_notes(Result(), groups) == []
    # A group whose members' calls differ in time beyond 10% is no group.
    assert spread_notes(Result(), [["a", "b"]]) == []
    Result.regions[1].gpu_time_s = 10 * 0.00104
    [note] = spread_notes(Result(), [["a", "b"]])
    assert "spread by 47.1%" in note
