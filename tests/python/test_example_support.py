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


def test_gate_runs_the_hooks_in_blocks_on_off_off_on_and_records_each_step():
    gate = example_support.StepGate(3)
    hooks = Hooks()
    gate.wrap(hooks, "begin", ["end"])
    for step in range(24):
        hooks.begin(step)
        hooks.end(step)
        gate.record_step_end()
    on_blocks = [0, 3, 4, 7]  # of 8 blocks of 3 steps
    expected = [s for s in range(24) if s // 3 in on_blocks]
    assert hooks.begun == expected and hooks.ended == expected
    assert gate.states == [s // 3 in on_blocks for s in range(24)]
    # Time inside the hooks is counted on the steps they ran, none elsewhere.
    assert [h > 0 for h in gate.hook_s] == gate.states


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
