# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Energy per region from Python (issue 32): joule.RegionRecorder,
joule.attribute, joule.torch.attribute and joule.attribution, on simulated
GPUs (650 W each, sampled every 10 ms) and CPU torch."""
import json
import math
import os
import re
import time

import pytest
import torch

import joule
import joule.attribution
import joule.torch

STEPS = 50


@pytest.fixture
def monitor(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")  # GPUs only
    return joule.Monitor(backend="sim", sim="count=2,load=1", interval_ms=10)


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                               torch.nn.Linear(128, 10))


def hooks_of(module):
    return (list(module._forward_pre_hooks) + list(module._forward_hooks) + list(module._backward_hooks) +
            list(getattr(module, "_backward_pre_hooks", {})))


def train(model, opt, session, steps=STEPS):
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))
    for _ in range(steps):
        with session.region("data"):
            # A data loader's wait: the window then spans >= 0.25 s, >= 25 of
            # the simulated GPUs' 10 ms samples for ~11 unknowns, however fast
            # the model's steps (the C++ edges made 50 of them take ~0.1 s).
            time.sleep(0.005)
            batch = x * 1.0
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(batch), y).backward()
        opt.step()


def test_torch_attribute_splits_a_training_window_among_the_models_children(monitor):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    own_step = opt.step
    with joule.torch.attribute(model, monitor, optimizer=opt) as session:
        with monitor.window("train") as w:
            train(model, opt, session)
    settled = monitor.settle(w.measurement, timeout_s=5.0)
    assert settled.settled
    attributions = session.result(settled, block_s=0.1, bootstrap_rounds=50)

    assert len(attributions) == len(monitor.gpus) == 2
    children = [name for name, _ in model.named_children()]
    expected = {f"{c}.{phase}" for c in children for phase in ("forward", "backward")} | {"optimizer.step", "data"}
    for gpu, a in enumerate(attributions):
        names = [r.name for r in a.regions]
        assert sorted(names) == sorted(expected), names
        for r in a.regions:
            assert r.calls == STEPS, (r.name, r.calls)
            assert r.gpu_time_s > 0
        parts = sum(r.energy_j for r in a.regions) + a.idle_energy_j
        assert parts == pytest.approx(a.window_energy_j, rel=1e-6)
        assert a.window_energy_j == pytest.approx(settled.gpu_energy_j[gpu], rel=1e-9)
        assert sum(r.share for r in a.regions) + a.idle_energy_j / a.window_energy_j == pytest.approx(1.0, rel=1e-6)
        assert a.observations > 0 and math.isfinite(a.scale)

        table = joule.attribution.format_table(a, gpu_label=f"GPU {gpu}")
        assert table.startswith(f"GPU {gpu}\n")
        for name in expected:
            assert f"\n{name} " in table, name
        assert "(idle)" in table
        window_line = next(line for line in table.splitlines() if line.startswith("window energy: "))
        shown_j = float(window_line.split()[2])  # three significant digits, in J here
        assert window_line.split()[3] == "J" and shown_j == pytest.approx(a.window_energy_j, rel=6e-3), window_line
        # Simulated GPUs are said under the label, before the header.
        assert table.splitlines()[1].startswith("SIMULATED GPU: ") == a.simulated
        first_row = 4 if a.simulated else 3
        energies = [next(r.energy_j for r in a.regions if table_line.startswith(r.name + " ")
                         or table_line.startswith(r.name + " *"))
                    for table_line in table.splitlines()[first_row:first_row + len(a.regions)]]
        assert energies == sorted(energies, reverse=True)  # by energy, largest first

    back = json.loads(joule.attribution.to_json(attributions))
    assert len(back) == 2
    for a, d in zip(attributions, back):
        assert d["window_energy_j"] == a.window_energy_j and d["notes"] == a.notes
        assert [r["name"] for r in d["regions"]] == [r.name for r in a.regions]
        for r, rd in zip(a.regions, d["regions"]):
            for key in ("calls", "gpu_time_s", "energy_j", "share", "energy_low_j"):
                value = getattr(r, key)
                assert rd[key] == value or (math.isnan(value) and math.isnan(rd[key])), key

    # Everything the session put on the model and the optimizer is gone.
    for name, module in model.named_modules():
        assert hooks_of(module) == [], name
    for p in model.parameters():
        assert not p._backward_hooks
    assert "step" not in vars(opt) and opt.step == own_step


def test_a_session_reports_each_modules_forward_and_backward_as_one_total(monitor):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with joule.torch.attribute(model, monitor, optimizer=opt) as session:
        with monitor.window("train") as w:
            train(model, opt, session)
    settled = monitor.settle(w.measurement, timeout_s=5.0)
    a = session.result(settled, block_s=0.1, bootstrap_rounds=50)[0]
    children = [name for name, _ in model.named_children()]
    assert sorted(t.name for t in a.totals) == sorted(children)  # not the optimizer's step, nor "data"
    by_name = {r.name: r for r in a.regions}
    for t in a.totals:
        parts = [by_name[f"{t.name}.forward"], by_name[f"{t.name}.backward"]]
        assert t.energy_j == pytest.approx(sum(p.energy_j for p in parts), rel=1e-9)
        assert t.gpu_time_s == pytest.approx(sum(p.gpu_time_s for p in parts), rel=1e-9)
        assert t.calls == STEPS and t.resolved == all(p.resolved for p in parts)
        if math.isfinite(t.energy_low_j):
            assert t.energy_low_j <= t.energy_j <= t.energy_high_j
    assert [d["name"] for d in a.to_dict()["totals"]] == [t.name for t in a.totals]
    table = joule.attribution.format_table(a)
    totals_block = table.split("totals (each the sum of its regions, the interval the sum's):\n")[1]
    for t in a.totals:
        assert f"\n{t.name} " in "\n" + totals_block, t.name
    assert [d["name"] for d in json.loads(joule.attribution.to_json([a]))[0]["totals"]] == [t.name for t in a.totals]
    # totals= replaces the modules' (None: none).
    assert session.result(settled, bootstrap_rounds=0, totals=None)[0].totals == []
    [everything] = session.result(settled, bootstrap_rounds=0, totals={"all": [r.name for r in a.regions]})[0].totals
    assert everything.name == "all"
    assert everything.energy_j == pytest.approx(sum(r.energy_j for r in a.regions), rel=1e-9)
    with pytest.raises(joule.UsageError, match="total 'x' names region 'nope', which is not among"):
        session.result(settled, totals={"x": ["nope"]})


def test_a_total_carries_its_parts_model_bias_added(monitor):
    recorder = joule.RegionRecorder(monitor)
    with monitor.window("w") as w:
        for _ in range(40):
            with recorder.region("a"):
                time.sleep(0.003)
            with recorder.region("b"):
                time.sleep(0.003)
            time.sleep(0.002)
    settled = w.settled(timeout_s=5.0)
    fit = dict(bootstrap_rounds=50, block_s=0.05, sample_response=joule.SampleResponse([0.25, 0.5, 0.25], 2),
               totals={"a+b": ["a", "b"]})
    [wide, _] = joule.attribute(monitor, settled, recorder, **fit)
    [bare, _] = joule.attribute(monitor, settled, recorder, model_bias=0.0, **fit)
    [t], [s] = wide.totals, bare.totals
    assert t.name == "a+b" and t.resolved and t.energy_j == s.energy_j
    assert t.energy_j == pytest.approx(sum(r.energy_j for r in wide.regions), rel=1e-12)
    # Added, not in quadrature: a module's forward and backward err the same way.
    more_j = 1.6448536269514722 * 0.075 * sum(abs(r.energy_j) for r in wide.regions)
    assert t.energy_high_j - t.energy_j == pytest.approx(math.sqrt((s.energy_high_j - s.energy_j) ** 2 + more_j ** 2))
    assert t.energy_j - t.energy_low_j == pytest.approx(math.sqrt((s.energy_j - s.energy_low_j) ** 2 + more_j ** 2))


def test_hooks_are_removed_and_regions_closed_when_training_raises(monitor):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(RuntimeError, match="shapes"):
        with joule.torch.attribute(model, monitor, depth=0, optimizer=opt) as session:
            assert [path for path, _ in session.modules()] == ["Sequential"]
            with session.region("data"):
                model(torch.randn(4, 31))  # raises inside forward: "Sequential.forward" stays open
    assert session.recorder.open_regions == 0
    assert any("Sequential.forward" in n for n in session.notes), session.notes
    assert session.recorder.names == ["data", "Sequential.forward"]
    assert all(hooks_of(m) == [] for m in model.modules())
    assert "step" not in vars(opt)


def test_a_module_returning_no_tensor_gets_a_note_not_a_crash(monitor):
    class Dicty(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return {"out": self.linear(x)}

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(8, 8)
            self.dicty = Dicty()

        def forward(self, x):
            return self.dicty(self.first(x))["out"].sum()

    model = Model()
    with joule.torch.attribute(model, monitor) as session:
        for _ in range(3):
            model(torch.randn(2, 8)).backward()
    assert "first.backward" in session.recorder.names
    assert "dicty.backward" not in session.recorder.names
    assert any(n.startswith("dicty.backward: not recorded") and "dict" in n for n in session.notes), session.notes
    assert session.recorder.open_regions == 0


def test_recorder_regions_nest_and_misnesting_names_both(monitor):
    recorder = joule.RegionRecorder(monitor)
    assert recorder.names == [] and recorder.open_regions == 0 and not recorder.synchronized
    with recorder.region("a") as region:
        assert region.name == "a"
        recorder.begin("b")
        assert recorder.open_regions == 2
        with pytest.raises(joule.UsageError, match="'a'.*'b'"):
            recorder.end("a")
        recorder.end("b")
    assert recorder.names == ["a", "b"] and recorder.open_regions == 0
    with pytest.raises(joule.UsageError, match="'c' is not open"):
        recorder.end("c")


def test_recorder_concurrent_calls_overlap_the_nesting_and_each_other(monitor):
    recorder = joule.RegionRecorder(monitor)
    t = recorder.clock_s()
    recorder.begin("backward", at_s=t)
    recorder.begin("allreduce", at_s=t + 0.002, concurrent=True)
    recorder.begin("allreduce", at_s=t + 0.003, concurrent=True)  # a second bucket
    recorder.end("backward", at_s=t + 0.004)
    recorder.begin("optimizer.step", at_s=t + 0.006)
    recorder.end("allreduce", at_s=t + 0.005, concurrent=True)  # found after the optimizer began
    assert recorder.open_concurrent_calls == 1 and recorder.open_regions == 1
    with pytest.raises(joule.UsageError, match="precedes its earliest open call's beginning"):
        recorder.end("allreduce", at_s=t + 0.001, concurrent=True)
    recorder.end("allreduce", at_s=t + 0.0055, concurrent=True)
    recorder.end("optimizer.step", at_s=t + 0.008)
    with pytest.raises(joule.UsageError, match="'backward' was recorded as nested and now as concurrent"):
        recorder.begin("backward", concurrent=True)
    assert recorder.concurrent_regions == ["allreduce"] and recorder.open_concurrent_calls == 0
    pieces = recorder.intervals(t, t + 0.01)
    assert [p[0] for p in pieces] == ["backward", "allreduce", "allreduce", "optimizer.step"]
    assert pieces[1][1:3] == pytest.approx((t + 0.002, t + 0.005)) and pieces[2][1:3] == pytest.approx(
        (t + 0.003, t + 0.0055))


def test_gpu_clock_hands_concurrent_edges_over_at_their_own_instants(monitor):
    """Concurrent edges (a DDP all-reduce's) go to the recorder as they fall,
    not moved up to the nested edge before them, and a late nested end goes
    before the last nested edge, not before a concurrent one."""
    recorder = joule.RegionRecorder(monitor)
    edges = joule.torch.GpuClock(recorder, events=FakeGpuEvents(recorder.clock_s))
    with monitor.window("w") as w:
        for _ in range(20):
            edges.begin("backward")
            time.sleep(0.002)
            edges.begin_concurrent("allreduce")
            time.sleep(0.002)
            edges.begin("layer")
            edges.begin_concurrent("allreduce")  # a second bucket, the last edge
            assert edges.end_before_last("backward")  # found late: goes before "layer" began
            time.sleep(0.002)
            edges.end("layer")
            edges.end_concurrent("allreduce")
            edges.end_concurrent("allreduce")
            time.sleep(0.002)
        edges.flush()
    assert edges.reordered_edges == 0
    assert recorder.open_regions == 0 and recorder.open_concurrent_calls == 0
    [a, _] = joule.attribute(monitor, w.settled(timeout_s=5.0), recorder, bootstrap_rounds=0)
    regions = {r.name: r for r in a.regions}
    assert regions["allreduce"].concurrent and regions["allreduce"].calls == 40
    assert not regions["backward"].concurrent and regions["backward"].calls == 20
    # The all-reduce overlaps the end of backward and the layer: ~4 ms a step.
    assert 20 * 0.0035 < regions["allreduce"].gpu_time_s < 20 * 0.006, regions["allreduce"].gpu_time_s
    assert 20 * 0.0035 < regions["backward"].gpu_time_s < 20 * 0.006
    # The table gives its power as the power it adds, signed.
    [row] = [line for line in joule.attribution.format_table(a).splitlines() if line.startswith("allreduce")]
    assert re.search(r" [+-]\d+\.\d W ", row), row


def step_pieces(recorder, names):
    """The pieces of one training step's regions, from the last "data" on."""
    pieces = recorder.intervals(0.0, 1e12)
    last_data = max(i for i, p in enumerate(pieces) if p[0] == "data")
    return [p for p in pieces[last_data:] if p[0] in names]


def test_backward_regions_follow_each_other_and_the_last_ends_with_autograd(monitor):
    # One autograd hook per call: a module's backward begins when its
    # output's gradient arrives and lasts until the next one's begins; the
    # first layer's ends when autograd is done. No hook on any parameter.
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with joule.torch.attribute(model, monitor, optimizer=opt, clock="host") as session:
        with monitor.window("train") as w:
            train(model, opt, session)
        assert not any(p._backward_hooks for p in model.parameters())
    assert session.notes == []
    backward = [f"{i}.backward" for i in (3, 2, 1, 0)]
    pieces = step_pieces(session.recorder, set(backward) | {"optimizer.step"})
    assert [p[0] for p in pieces] == backward + ["optimizer.step"], pieces
    assert not any(p[3] for p in pieces)  # none resumed: nothing nests in them
    for earlier, later in zip(pieces, pieces[1:]):
        assert 0.0 <= later[1] - earlier[2] < 0.002, (earlier, later)  # an end, then the next begin
    a = session.result(w.settled(timeout_s=5.0), bootstrap_rounds=0)[0]
    assert all({r.name: r.calls for r in a.regions}[name] == STEPS for name in backward)


def test_a_region_of_yours_around_a_whole_step_ends_after_what_ended_in_it(monitor):
    # Its end follows the first layer's backward end (autograd's callback)
    # directly: it goes after it, not before (which the recorder refuses).
    model = small_model()
    with joule.torch.attribute(model, monitor, clock="host") as session:
        for _ in range(3):
            with session.region("step"):
                model(torch.randn(4, 32)).sum().backward()
    pieces = session.recorder.intervals(0.0, 1e12)
    assert [p[0] for p in pieces if p[0].endswith(".backward")][-4:] == [f"{i}.backward" for i in (3, 2, 1, 0)]
    assert [p[0] for p in pieces[-2:]] == ["0.backward", "step"] and pieces[-1][1] == pieces[-2][2], pieces
    assert session.notes == [] and session.recorder.open_regions == 0


def test_a_backward_pass_that_raises_leaves_no_region_open_into_the_next_step(monitor):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))

    def fails(grad):
        raise RuntimeError("a hook of yours failed")

    with joule.torch.attribute(model, monitor, optimizer=opt, clock="host") as session:
        hidden = model[1](model[0](x))
        hidden.register_hook(fails)  # after 3, 2 and 1's backward began, before 0's
        with pytest.raises(RuntimeError, match="a hook of yours failed"):
            torch.nn.functional.cross_entropy(model[3](model[2](hidden)), y).backward()
        train(model, opt, session, steps=3)
    assert any("did not finish" in n for n in session.notes), session.notes
    assert session.recorder.open_regions == 0
    pieces = session.recorder.intervals(0.0, 1e12)
    assert not any(p[3] for p in pieces if p[0].endswith(".backward")), pieces  # no forward inside a backward
    assert [p[0] for p in step_pieces(session.recorder, {"3.backward", "0.backward", "optimizer.step"})] == \
        ["3.backward", "0.backward", "optimizer.step"]


def test_attributing_an_unsettled_window_is_a_usage_error(monitor):
    recorder = joule.RegionRecorder(monitor)
    monitor.begin_window("w")
    with recorder.region("a"):
        pass
    m = monitor.end_window("w")
    assert not m.settled
    with pytest.raises(joule.UsageError, match="not settled"):
        joule.attribute(monitor, m, recorder)


def recorded_work(monitor, steps):
    """A window of `steps` calls of region "work" (4 ms) with 3 ms gaps: the
    settled window and the recorder."""
    recorder = joule.RegionRecorder(monitor)
    with monitor.window("w") as w:
        for _ in range(steps):
            with recorder.region("work"):
                time.sleep(0.004)
            time.sleep(0.003)
    return w.settled(timeout_s=5.0), recorder


def test_attribution_of_explicit_regions_with_a_given_baseline(monitor, tmp_path):
    window, recorder = recorded_work(monitor, 40)
    [a, _] = joule.attribute(monitor, window, recorder, baseline_w=100.0, bootstrap_rounds=0)
    assert a.baseline_w == 100.0 and a.baseline_separated and not a.baseline_estimated
    [work] = a.regions
    assert work.name == "work" and work.calls == 40 and work.resolved
    assert math.isnan(work.energy_low_j)  # no bootstrap
    d = a.to_dict()
    assert math.isnan(d["regions"][0]["energy_low_j"]) and d["baseline_w"] == 100.0
    assert "given" in repr(a) and "'work'" in repr(work)
    table = joule.attribution.format_table(a)
    assert "baseline: 100.0 W (given)" in table
    # The page: each GPU's section, the region in the chart and the table.
    page_path = tmp_path / "regions.html"
    joule.attribution.to_html([a], str(page_path), title="Explicit regions", gpu_labels=["GPU 0 (sim)"])
    page = page_path.read_text()
    assert "<h2>GPU 0 (sim)</h2>" in page and "share of the window's time and of its energy" in page
    assert page.count(">work<") >= 1 and "100 W (given)" in page


@pytest.mark.parametrize("max_w, capped", [(550, True), (700, False)])
def test_an_attribution_says_when_the_gpu_sat_at_its_power_cap(monkeypatch, tmp_path, max_w, capped):
    # 650 W asked of each simulated GPU: held at a 550 W limit, under a 700 W one.
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    monitor = joule.Monitor(backend="sim", sim=f"count=1,load=1,max_w={max_w}", interval_ms=10)
    [a] = joule.attribute(monitor, *recorded_work(monitor, 30), bootstrap_rounds=0)
    assert a.power_capped_share == (1.0 if capped else 0.0)
    assert a.to_dict()["power_capped_share"] == a.power_capped_share
    assert any("at its power cap in 100% of the samples" in n for n in a.notes) == capped, a.notes
    monitor.write_timeline_csv(str(tmp_path / "timeline.csv"))
    header, *rows = (tmp_path / "timeline.csv").read_text().splitlines()
    column = header.split(",").index("power_capped")
    assert rows and {r.split(",")[column] for r in rows} == {"1" if capped else "0"}


def test_recorder_edges_call_the_monitors_synchronize(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    calls = []
    monitor = joule.Monitor(backend="sim", sim="count=1", interval_ms=10, synchronize=lambda: calls.append(1))
    recorder = joule.RegionRecorder(monitor)
    assert recorder.synchronized
    with recorder.region("a"):
        recorder.begin("b")
        recorder.end("b")
    assert len(calls) == 4  # one per edge, the GIL taken back around the Python call


def test_in_place_ops_after_hooked_modules_and_module_lists(monitor):
    """Backward regions hang on the graph, not on wrapped outputs: an
    in-place ReLU right after a hooked layer trains, every call's backward
    is one region, and the items of a ModuleList stand at its depth."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Linear(32, 64)
            self.act = torch.nn.ReLU(inplace=True)
            self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(inplace=True))
                                              for _ in range(3))
            self.head = torch.nn.Linear(64, 10)

        def forward(self, x):
            x = self.act(self.stem(x))
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with joule.torch.attribute(model, monitor, optimizer=opt, clock="host") as session:
        assert [p for p, _ in session.modules()] == ["stem", "act", "blocks.0", "blocks.1", "blocks.2", "head"]
        with monitor.window("train") as w:
            train(model, opt, session, steps=300)
    assert session.notes == []
    [a, _] = session.result(monitor.settle(w.measurement, timeout_s=5.0), bootstrap_rounds=0)
    calls = {r.name: r.calls for r in a.regions}
    for path in ("stem", "act", "blocks.0", "blocks.1", "blocks.2", "head"):
        assert calls[f"{path}.forward"] == 300 and calls[f"{path}.backward"] == 300, (path, calls)
    with joule.torch.attribute(model, monitor, depth=2, clock="host") as deeper:
        assert [p for p, _ in deeper.modules()] == [f"blocks.{i}.{j}" for i in range(3) for j in range(2)]


class FakeGpuEvents:
    """CUDA events on a stand-in GPU whose clock runs `rate` times the
    monitor's, from another origin, and reaches each event `lag_s` after it
    was queued (a GPU behind its host). The clocks' mapping must undo both."""

    def __init__(self, clock_s, rate=0.98, lag_s=0.002):
        self.clock_s, self.rate, self.lag_s = clock_s, rate, lag_s
        self.made = 0

    def gpu_now(self):
        return 1000.0 + self.rate * self.clock_s()

    def new(self):
        self.made += 1
        return {}

    def record(self, event):
        event["at"] = self.gpu_now() + self.rate * self.lag_s

    def done(self, event):
        return self.gpu_now() >= event["at"]

    def elapsed_s(self, earlier, later):
        return float(f"{1e3 * (later['at'] - earlier['at']):.6g}") / 1e3  # float milliseconds, as CUDA gives

    def synchronize(self):
        time.sleep(self.lag_s)  # the last event queued is due lag_s later


def test_gpu_clock_maps_events_to_the_monitors_clock_and_takes_the_drift_out(monitor):
    recorder = joule.RegionRecorder(monitor)
    events = FakeGpuEvents(recorder.clock_s)
    edges = joule.torch.GpuClock(recorder, events=events, drain_every=8)
    inner_s = outer_s = 0.0  # the host's time between the edges, and around them
    with monitor.window("w") as w:
        for i in range(40):
            t0 = recorder.clock_s()
            edges.begin("work")
            t1 = recorder.clock_s()
            time.sleep(0.008)
            t2 = recorder.clock_s()
            edges.end("work")
            t3 = recorder.clock_s()
            inner_s, outer_s = inner_s + t2 - t1, outer_s + t3 - t0
            time.sleep(0.002)
            if i == 19:
                edges.flush()  # a window attributed halfway: a third anchor, edges on either side of it
        edges.flush()
    assert events.made < 40  # events are reused once read
    assert edges.drift_ppm == pytest.approx(1e6 * (1 / 0.98 - 1), rel=0.05)  # the monitor's clock runs 2% faster
    assert edges.uncertainty_s < 0.01
    [a, _] = joule.attribute(monitor, w.settled(timeout_s=5.0), recorder, bootstrap_rounds=0)
    [work] = a.regions
    assert work.calls == 40
    # Mapped back to the monitor's clock, the GPU's spans are the host's, shifted by the lag (not stretched 2%).
    assert inner_s - 1e-5 <= work.gpu_time_s <= outer_s + 1e-5, (inner_s, work.gpu_time_s, outer_s)
    assert 0.98 * work.gpu_time_s < inner_s - 1e-5  # the GPU's own spans (2% short) would not have passed


def test_a_measured_sample_response_goes_into_the_fit(monitor):
    recorder = joule.RegionRecorder(monitor)
    with monitor.window("w") as w:
        for _ in range(40):
            with recorder.region("work"):
                time.sleep(0.004)
            time.sleep(0.002)
    settled = w.settled(timeout_s=5.0)
    response = joule.SampleResponse([0.25, 0.5, 0.25], first_lag_ms=2)
    assert response.to_dict()["response_ms"] == [0.25, 0.5, 0.25] and response.first_lag_ms == 2
    [a, _] = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0, sample_response=response)
    assert any("measured response (from 2 to 5 ms before the stamp)" in n for n in a.notes), a.notes
    assert a.regions[0].calls == 40 and a.regions[0].resolved
    # The model's own bias, carried into the interval: by default the proofs' 7.5% (1 sigma).
    fit = dict(bootstrap_rounds=50, block_s=0.05, sample_response=response)
    [wide, _] = joule.attribute(monitor, settled, recorder, **fit)
    [bare, _] = joule.attribute(monitor, settled, recorder, model_bias=0.0, **fit)
    assert any("the model's own bias, 7.5% of each region's energy" in n for n in wide.notes), wide.notes
    assert any("statistical error only (model bias 0)" in n for n in bare.notes), bare.notes
    w, b = wide.regions[0], bare.regions[0]
    assert w.energy_j == b.energy_j
    more_j = 1.6448536269514722 * 0.075 * w.energy_j
    assert w.energy_high_j - w.energy_j == pytest.approx(math.sqrt((b.energy_high_j - b.energy_j) ** 2 + more_j ** 2))
    assert w.energy_j - w.energy_low_j == pytest.approx(math.sqrt((b.energy_j - b.energy_low_j) ** 2 + more_j ** 2))
    with pytest.raises(joule.UsageError, match="model bias -0.1: must be within"):
        joule.attribute(monitor, settled, recorder, sample_response=response, model_bias=-0.1)
    with pytest.raises(joule.UsageError, match="replaces the cover and the delay"):
        joule.attribute(monitor, settled, recorder, sample_response=response, sample_cover_ms=10)
    with pytest.raises(joule.UsageError, match="no region 'high'"):
        joule.fit_sample_response(monitor, settled, recorder)
    with pytest.raises(joule.UsageError, match="GPU 5 does not exist"):
        joule.fit_sample_response(monitor, settled, recorder, gpu=5, region="work")


# In a fresh interpreter: the CUDA runtime found only once loaded, then a
# whole session's edges recorded from C++ through it, on the stream PyTorch's
# C shim names (tests/fake_cudart: its GPU passes each event 2 ms after its
# record, its clock 0.1% slow; fake_torch_cuda.cc: the shim).
_CUDA_RUNTIME_SESSION = r"""
import ctypes, os, sys, time
import torch
import joule, joule.torch
from joule.torch.regions import RegionAttribution

assert joule.CudaRuntimeEvents.loaded_runtime() is None
try:
    joule.CudaRuntimeEvents(lambda device: 0)
    sys.exit("made without a runtime")
except joule.DeviceError as e:
    assert "no CUDA runtime (libcudart.so) is loaded" in str(e), e
assert joule.torch.clocks.cuda_runtime_events() is None  # CPU torch: the fallback is CudaEvents

fake = ctypes.CDLL(os.environ["JOULE_TEST_FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
fake.fake_cudart_last_stream.restype = ctypes.c_size_t
assert joule.CudaRuntimeEvents.loaded_runtime() == os.environ["JOULE_TEST_FAKE_CUDART"]
# The stream through Python: a callable asked at every edge.
asked = []
events = joule.CudaRuntimeEvents(lambda device: asked.append(device) or 0xBEEF)
assert events.stream_source == "python"
clock = joule.GpuEdgeClock(joule.RegionRecorder(joule.Monitor(backend="sim", sim="count=1")), events)
clock.begin("x")
clock.end("x")
assert set(asked) == {0} and fake.fake_cudart_last_stream() == 0xBEEF
# From PyTorch's C shim once its libtorch_cuda is loaded: no Python per edge.
try:
    joule.CudaRuntimeEvents()
    sys.exit("made without PyTorch's C shim")
except joule.DeviceError as e:
    assert "aoti_torch_get_current_cuda_stream" in str(e), e
shim = ctypes.CDLL(os.environ["JOULE_TEST_FAKE_TORCH_CUDA"])
shim.fake_torch_cuda_set_stream(ctypes.c_size_t(0xCAFE))
shim.fake_torch_cuda_stream_calls.restype = ctypes.c_long
events = joule.CudaRuntimeEvents()
assert events.stream_source == "torch"

monitor = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
fake.fake_cudart_records.restype = ctypes.c_size_t
with RegionAttribution(model, monitor, events=events) as session:
    assert type(session.edges).__name__ == "GpuEdgeClock"
    with monitor.window("train") as w:
        records = fake.fake_cudart_records()
        for _ in range(100):
            with session.region("data"):
                time.sleep(0.002)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        # An event an edge, but one where a backward region hands over to the next:
        # data 2, forward 3 x 2, backward 1 + 2 hand-overs + the pass's end.
        assert fake.fake_cudart_records() - records == 100 * 12, fake.fake_cudart_records() - records
[a] = session.result(w.settled(timeout_s=5.0), bootstrap_rounds=0)
calls = {r.name: r.calls for r in a.regions}
# The GPU runs 2 ms behind the host: the last step's modules may begin after the window closed.
assert set(calls) == {"data", "0.forward", "1.forward", "2.forward", "0.backward", "1.backward", "2.backward"}
assert all(99 <= n <= 100 for n in calls.values()), calls
data = next(r for r in a.regions if r.name == "data")
assert 100 * 0.002 <= data.gpu_time_s < 100 * 0.010, data.gpu_time_s  # a 2 ms sleep, overshooting on a loaded host
assert fake.fake_cudart_last_stream() == 0xCAFE and shim.fake_torch_cuda_stream_calls() >= 800  # 8+ edges a step
assert set(asked) == {0}  # the Python callable was not asked again
assert session.clock_uncertainty_s < 0.005
print("ok")
"""


def test_a_session_records_its_edges_through_the_loaded_cuda_runtime(monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    if not (os.environ.get("JOULE_TEST_FAKE_CUDART") and os.environ.get("JOULE_TEST_FAKE_TORCH_CUDA")):
        pytest.skip("JOULE_TEST_FAKE_CUDART or JOULE_TEST_FAKE_TORCH_CUDA is not set (ctest sets them)")
    done = subprocess.run([sys.executable, "-c", _CUDA_RUNTIME_SESSION], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
