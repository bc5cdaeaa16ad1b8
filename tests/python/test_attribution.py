"""Energy per region from Python (issue 32): joule.RegionRecorder,
joule.attribute, joule.torch.attribute and joule.attribution, on simulated
GPUs (650 W each, sampled every 10 ms) and CPU torch."""
import json
import math

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
        assert window_line.startswith(f"window energy: {a.window_energy_j:.0f} J"), (window_line, a.window_energy_j)
        energies = [next(r.energy_j for r in a.regions if table_line.startswith(r.name + " ")
                         or table_line.startswith(r.name + " *"))
                    for table_line in table.splitlines()[3:3 + len(a.regions)]]
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


def test_attributing_an_unsettled_window_is_a_usage_error(monitor):
    recorder = joule.RegionRecorder(monitor)
    monitor.begin_window("w")
    with recorder.region("a"):
        pass
    m = monitor.end_window("w")
    assert not m.settled
    with pytest.raises(joule.UsageError, match="not settled"):
        joule.attribute(monitor, m, recorder)


def test_attribution_of_explicit_regions_with_a_given_baseline(monitor, tmp_path):
    recorder = joule.RegionRecorder(monitor)
    import time

    with monitor.window("w") as w:
        for _ in range(40):
            with recorder.region("work"):
                time.sleep(0.004)
            time.sleep(0.003)
    [a, _] = joule.attribute(monitor, w.settled(timeout_s=5.0), recorder, baseline_w=100.0, bootstrap_rounds=0)
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
