# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.window (running estimates for plain and Accelerate loops) and the
tracker adapters of joule.trackers against recording stand-ins of
TensorBoard's SummaryWriter, MLflow (module and client) and a W&B run."""
import json
import math
import time

import pytest

import joule
import joule.meter
import joule.trackers
from test_frameworks_hf import RecordingWriter, StubCarbon

SIM_W = 650.0  # a simulated GPU at load=1


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monitor = joule.Monitor(backend="sim", sim="count=2,load=1", interval_ms=10)
    monkeypatch.setattr(joule.meter, "_default", monitor)
    return monitor


def test_window_running_estimates_then_settled(sim):
    with joule.window("epoch") as w:
        assert w.open and w.measuring
        time.sleep(0.15)
        running = w.energy_so_far_j
        assert running == pytest.approx(2 * SIM_W * w.elapsed_s, rel=0.15)
        assert w.average_power_w == pytest.approx(2 * SIM_W, rel=0.1)
        time.sleep(0.05)
        assert w.energy_so_far_j > running
        assert w.measurement is None
    m = w.measurement
    assert m.settled and w.monitor is sim
    assert w.energy_so_far_j == m.gpu_total_energy_j == w.energy_j
    assert w.elapsed_s == m.elapsed_s
    assert w.energy_j == pytest.approx(2 * SIM_W * m.elapsed_s, rel=0.01)
    assert w.average_power_w == pytest.approx(2 * SIM_W, rel=0.01)


def test_window_running_estimate_follows_the_load(sim):
    sim.set_simulated_load(1.0)
    with joule.window("w") as w:
        time.sleep(0.1)
        sim.set_simulated_load(0.0)
        time.sleep(0.1)
        low = w.energy_so_far_j
        time.sleep(0.1)
        # Idle GPUs still draw power, but less than at full load.
        assert w.energy_so_far_j - low < 0.8 * (2 * SIM_W * 0.1)
    sim.set_simulated_load(1.0)


def test_windows_nest_and_sum(sim):
    with joule.window("outer") as outer:
        parts = []
        for i in range(3):
            with joule.window("step", samples=8, tokens=100) as w:
                time.sleep(0.03)
            parts.append(w)
    total = sum(p.energy_j for p in parts)
    assert total <= outer.energy_j
    assert parts[0].metrics()["joule/step_energy_per_sample_j"] == pytest.approx(parts[0].energy_j / 8)
    assert parts[0].metrics()["joule/step_energy_per_token_j"] == pytest.approx(parts[0].energy_j / 100)


def test_window_carbon_and_trackers(sim):
    writer = RecordingWriter()
    with joule.window("epoch", carbon=StubCarbon(), trackers=[writer], step=3) as w:
        time.sleep(0.05)
    tags = {tag: (v, step) for tag, v, step in writer.scalars}
    assert tags["joule/epoch_energy_j"] == (pytest.approx(w.energy_j), 3)
    assert tags["joule/epoch_co2e_g"][0] == pytest.approx(w.energy_j / 3.6e6 * 1.2 * 400.0)
    assert tags["joule/epoch_cost"][0] == pytest.approx(w.energy_j / 3.6e6 * 1.2 * 0.30)


def test_window_on_a_rank_that_measures_nothing(monkeypatch):
    monkeypatch.setattr(joule.meter, "_default", joule.meter._NONE)
    with joule.window("epoch") as w:
        assert not w.measuring
        assert math.isnan(w.energy_so_far_j)
    assert math.isnan(w.energy_j) and w.measurement is None and w.elapsed_s >= 0


def test_window_needs_begin(sim):
    w = joule.window("x")
    with pytest.raises(joule.UsageError):
        w.energy_so_far_j


def test_default_monitor_made_once(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    monkeypatch.setenv("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("JOULE_SIM", "count=1,load=1")
    monkeypatch.setattr(joule.meter, "_default", None)
    a = joule.meter.default_monitor()
    assert a is joule.meter.default_monitor() and a.simulated
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(joule.meter, "_default", None)
    assert joule.meter.default_monitor() is None


# -- trackers -------------------------------------------------------------------------


class RecordingMlflowModule:
    """mlflow's fluent API: log_metrics(metrics, step=None), log_dict(dictionary, artifact_file)."""

    def __init__(self):
        self.metrics, self.dicts = [], []

    def log_metrics(self, metrics, step=None, synchronous=None, run_id=None, timestamp=None, model_id=None,
                    dataset=None):
        self.metrics.append((dict(metrics), step))

    def log_dict(self, dictionary, artifact_file, run_id=None):
        self.dicts.append((json.loads(json.dumps(dictionary)), artifact_file))


class RecordingMlflowClient:
    """MlflowClient: log_metric(run_id, key, value, timestamp=None, step=None), log_dict(run_id, dictionary, artifact_file)."""

    def __init__(self):
        self.metrics, self.dicts = [], []

    def log_metric(self, run_id, key, value, timestamp=None, step=None, synchronous=None, dataset_name=None,
                   dataset_digest=None, model_id=None):
        self.metrics.append((run_id, key, value, step))

    def log_dict(self, run_id, dictionary, artifact_file):
        self.dicts.append((run_id, dictionary, artifact_file))


class RecordingWandbRun:
    """A wandb Run: log(data, step=None, commit=None), summary (a dict-like with update)."""

    def __init__(self):
        self.logged = []
        self.summary = {}

    def log(self, data, step=None, commit=None):
        self.logged.append((dict(data), step))


SUMMARY = {"energy_j": 10.0, "phases": {"train_step": {"energy_j": 8.0}}, "epochs": [{"epoch": 0}], "run": "r",
           "co2e_g": None}
METRICS = {"joule/energy_j": 1.5, "joule/power_w": 300, "note": "text", "bad": float("nan"), "flag": True}


class LaggingMonitor:
    """Ended windows and spans settle once the data (data_s) passes their end,
    as a GPU's counter readings lag the host; counts the computations
    (refresh, measure_span)."""

    def __init__(self):
        self.now_s = self.data_s = 0.0
        self.refreshes = 0
        self._open = {}

    def clock_s(self):
        return self.now_s

    def measure_span(self, begin_s, end_s, name=""):
        self.refreshes += 1
        return self._measurement(begin_s, end_s)

    def measure_spans(self, begins_s, ends_s):
        self.calls = getattr(self, "calls", 0) + 1
        energies = []
        for b, e in zip(begins_s, ends_s):
            m = self.measure_span(b, e)
            if not m.settled:
                break
            energies.append(m.gpu_total_energy_j)
        return energies

    def begin_window(self, name):
        self._open[name] = self.now_s

    def end_window(self, name):
        begin_s = self._open.pop(name)
        return self._measurement(begin_s, self.now_s)

    def refresh(self, m):
        self.refreshes += 1
        return self._measurement(m.begin_s, m.end_s)

    def settle(self, m, timeout_s):
        self.data_s = max(self.data_s, m.end_s)  # the wait: the data catches up
        return self._measurement(m.begin_s, m.end_s, settled=True)

    def _measurement(self, begin_s, end_s, settled=None):
        from types import SimpleNamespace

        energy_j = 100.0 * (end_s - begin_s)
        return SimpleNamespace(begin_s=begin_s, end_s=end_s, elapsed_s=end_s - begin_s, gpu_total_energy_j=energy_j,
                               gpu_energy_j=[energy_j], total_energy_j=energy_j,
                               settled=end_s <= self.data_s if settled is None else settled)


def test_a_poll_costs_one_refresh_while_the_data_lags():
    # A step's window waits until the data covers its end (~0.1-1 s on a
    # GPU: tens of steps); a hook's poll refreshes them in the order they
    # ended and stops at the first still waiting, so its cost does not grow
    # with the steps in flight.
    mon = LaggingMonitor()
    meter = joule.meter.PhaseMeter(mon)
    for _ in range(50):
        mon.now_s += 0.01
        meter.switch("train_step")
    meter.poll()
    assert mon.calls == 1 and mon.refreshes == 1 and meter.energy_j == 0.0  # one call, stopped at the first
    mon.data_s = 0.2501
    mon.refreshes = 0
    meter.poll()
    credited = meter.totals["train_step"].windows
    assert credited == 24 and mon.refreshes == credited + 1  # the 24 ended by 0.25 s, then the first waiting
    assert mon.calls == 2
    assert meter.energy_j == pytest.approx(100.0 * 0.24)
    meter.finish()
    assert meter.totals["train_step"].windows == 50


def test_tensorboard_adapter():
    writer = RecordingWriter()
    t = joule.trackers.adapt(writer)
    assert isinstance(t, joule.trackers.TensorBoard)
    t.log_metrics(METRICS, 7)
    assert writer.scalars == [("joule/energy_j", 1.5, 7), ("joule/power_w", 300.0, 7)]
    t.log_summary(SUMMARY)
    tag, text, _ = writer.texts[0]
    assert tag == "joule/summary" and '"energy_j": 10.0' in text
    assert ("joule/run/energy_j", 10.0, 0) in writer.scalars


def test_mlflow_adapters():
    mod = RecordingMlflowModule()
    t = joule.trackers.adapt(mod)
    assert isinstance(t, joule.trackers.MLflow)
    t.log_metrics(METRICS, 3)
    assert mod.metrics == [({"joule/energy_j": 1.5, "joule/power_w": 300.0}, 3)]
    t.log_summary(SUMMARY)
    assert mod.dicts[0][1] == "joule_energy.json" and mod.dicts[0][0]["energy_j"] == 10.0

    client = RecordingMlflowClient()
    t = joule.trackers.MLflow(client=client, run_id="abc")
    t.log_metrics(METRICS, 4)
    assert client.metrics == [("abc", "joule/energy_j", 1.5, 4), ("abc", "joule/power_w", 300.0, 4)]
    t.log_summary(SUMMARY)
    assert client.dicts[0][0] == "abc" and client.dicts[0][2] == "joule_energy.json"
    with pytest.raises(ValueError):
        joule.trackers.MLflow(client=client)


def test_wandb_adapter():
    run = RecordingWandbRun()
    t = joule.trackers.adapt(run)
    assert isinstance(t, joule.trackers.WandB)
    t.log_metrics(METRICS, 5)
    assert run.logged == [({"joule/energy_j": 1.5, "joule/power_w": 300.0}, 5)]
    joule.trackers.WandB(run, use_step=False).log_metrics(METRICS, 6)
    assert run.logged[-1][1] is None
    t.log_summary(SUMMARY)
    assert run.summary["joule/energy_j"] == 10.0
    assert run.summary["joule/phases/train_step/energy_j"] == 8.0
    assert "joule/co2e_g" not in run.summary  # None is left out


def test_adapt_rejects_unknown_and_passes_trackers_through():
    class Mine:
        def log_metrics(self, metrics, step): pass
        def log_summary(self, summary): pass

    mine = Mine()
    assert joule.trackers.adapt(mine) is mine
    with pytest.raises(TypeError):
        joule.trackers.adapt(object())


def test_measure_span_is_a_window_with_those_edges(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    mon = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
    mon.begin_window("w")
    time.sleep(0.05)
    m = mon.settle(mon.end_window("w"), 2.0)
    span = mon.measure_span(m.begin_s, m.begin_s + m.elapsed_s, "span")
    assert span.settled and span.name == "span"
    assert span.gpu_total_energy_j == pytest.approx(m.gpu_total_energy_j, rel=1e-9)
    late = mon.measure_span(mon.clock_s(), mon.clock_s() + 10.0)
    assert not late.settled  # no data covers a span that ends in the future


def test_phase_edges_wait_where_the_monitor_synchronizes(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    waits = []
    mon = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10, synchronize=lambda: waits.append(1))
    assert mon.synchronizes
    meter = joule.meter.PhaseMeter(mon)
    meter.switch("train_step")
    meter.switch("other")
    assert len(waits) == 2
    plain = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
    assert not plain.synchronizes
    plain.synchronize()  # nothing to wait for


def test_monotonic_offset_maps_time_monotonic_onto_the_monitors_clock(monkeypatch):
    # The callbacks' phase edges read time.monotonic() through this offset instead of calling clock_s().
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    mon = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
    offset = mon.monotonic_offset_s
    assert offset is not None
    for _ in range(3):
        before = mon.clock_s()
        mapped = time.monotonic() - offset
        after = mon.clock_s()
        assert before - 1e-6 <= mapped <= after + 1e-6
        time.sleep(0.01)
    meter = joule.meter.PhaseMeter(mon)
    lo = mon.clock_s()
    meter.switch("train_step")
    meter.switch(None)
    hi = mon.clock_s()
    (phase, begin_s, end_s, _, _), = meter._spans
    assert phase == "train_step" and lo - 1e-6 <= begin_s <= end_s <= hi + 1e-6
