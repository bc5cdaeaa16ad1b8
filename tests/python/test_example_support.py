# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""examples/common/example_support.py, the plumbing the framework examples share:
the package check (a package found under either of two names) and the step
gate of --joule-ab (joule's hooks on and off in blocks of one run, which
bench/gpu_frameworks.py turns into the per-step overhead)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "common"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import example_support  # noqa: E402
import gpu_frameworks  # noqa: E402


def test_require_accepts_a_package_under_either_name():
    # "lightning|pytorch_lightning": the package's two names; json stands for the one installed.
    example_support.require("x", [("joule_no_such_module|json", "hint")])


def test_require_exits_naming_every_missing_package():
    with pytest.raises(SystemExit) as e:
        example_support.require("x", [("joule_no_a|joule_no_b", "a (install a)"), ("json", "json"),
                                      ("joule_no_c", "c (install c)")])
    assert str(e.value) == "x: missing a (install a); c (install c)"


class Hooks:
    def __init__(self):
        self.begun = []
        self.ended = []

    def begin(self, step):
        self.begun.append(step)

    def end(self, step):
        self.ended.append(step)


def run_gate(gate, steps):
    hooks = Hooks()
    gate.wrap(hooks, "begin", ["end"])
    for step in range(steps):
        hooks.begin(step)
        hooks.end(step)
        gate.record_step_end()
    return hooks


def test_gate_runs_the_hooks_in_mirrored_groups_of_blocks_drawn_at_random_and_records_each_step():
    gate = example_support.StepGate(3)
    hooks = run_gate(gate, 3 * 4 * 40)  # 40 groups of four blocks of 3 steps
    groups = {tuple(gate.states[12 * g + 3 * b] for b in range(4)) for g in range(40)}
    assert groups == {(True, False, False, True), (False, True, True, False)}  # both orders drawn
    for step, on in enumerate(gate.states):
        assert gate.states[step - step % 3] == on  # one state a block
    expected = [s for s, on in enumerate(gate.states) if on]
    assert hooks.begun == expected and hooks.ended == expected
    # Time inside the hooks is counted on the steps they ran, none elsewhere.
    assert [h > 0 for h in gate.hook_s] == gate.states
    # The same seed draws the same blocks.
    assert run_gate(example_support.StepGate(3), 3 * 4 * 40) and example_support.StepGate(3).states == []
    again = example_support.StepGate(3)
    run_gate(again, 3 * 4 * 40)
    assert again.states == gate.states


def test_null_gate_labels_blocks_alike_but_runs_the_hooks_in_every_step():
    gate = example_support.StepGate(3, null=True)
    hooks = run_gate(gate, 120)
    assert hooks.begun == list(range(120)) and hooks.ended == list(range(120))
    labelled = example_support.StepGate(3)
    run_gate(labelled, 120)
    assert gate.states == labelled.states and 0 < sum(gate.states) < 120


def ab_result(cost, block=10, steps=4000, step_s=0.01):
    """A run's result as the examples write it: joule's hooks cost `cost` of a step while on."""
    gate = example_support.StepGate(block)
    ends, t = [], 0.0
    for step in range(steps):
        gate.begin_step()
        wobble = 1 + 0.02 * ((step * 7919) % 13 - 6) / 6  # deterministic jitter, same on and off
        t += step_s * wobble * (1 + cost if gate.on else 1)
        ends.append(t)
        gate.record_step_end()
    return {"step_periods_s": [b - a for a, b in zip(ends, ends[1:])], "step_joule_on": gate.states,
            "joule_ab_block": block}


def test_ab_overhead_is_not_moved_by_a_slow_step_that_recurs_every_epoch():
    # An epoch's first batch (here 5x a step, every 64 steps) is joule's cost in
    # no block; with one fixed order of blocks in 80-step groups, 3 of every 5
    # epoch starts fell in on blocks. The drawn orders balance them.
    gate = example_support.StepGate(20)
    ends, t = [], 0.0
    for step in range(40000):
        gate.begin_step()
        t += 0.01 * (5 if step % 64 == 1 else 1)
        ends.append(t)
        gate.record_step_end()
    result = {"step_periods_s": [b - a for a, b in zip(ends, ends[1:])], "step_joule_on": gate.states,
              "joule_ab_block": 20}
    a = gpu_frameworks.ab_overhead(result, skip_s=1.0)
    assert abs(a["overhead"]) < 0.005, a["overhead"]


@pytest.mark.parametrize("cost", [0.0, 0.004, 0.03])
def test_ab_overhead_recovers_the_cost_of_the_on_blocks(cost):
    a = gpu_frameworks.ab_overhead(ab_result(cost), skip_s=1.0)
    assert a["groups"] >= 90
    assert a["overhead"] == pytest.approx(cost, abs=0.0015)
    assert a["interval"][0] <= a["overhead"] <= a["interval"][1]
    assert a["within_target"] == (cost <= gpu_frameworks.TARGET_OVERHEAD)


def test_ab_overhead_says_nothing_from_too_short_a_run():
    a = gpu_frameworks.ab_overhead(ab_result(0.01, steps=60), skip_s=0.0)
    assert a["overhead"] is None and a["within_target"] is False
