# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.hf.EnergyCallback against a stand-in of transformers 5.x's Trainer
(framework_standins.py: the callback interface and the event order of a
training run with logging, evaluation and checkpoint saves), on simulated GPUs."""
import json
import math
import os

import pytest

import joule
import joule.meter
from framework_standins import Trainer, TrainingArguments, install_transformers


class StubCarbon:
    """What joule.Carbon's footprint(energy_j) returns (its keys), at 400 g/kWh, PUE 1.2, 0.30 EUR/kWh."""

    def __init__(self):
        self.calls = []

    def footprint(self, energy_j):
        self.calls.append(energy_j)
        kwh = energy_j / 3.6e6
        return {"energy_kwh": kwh, "co2e_g": kwh * 1.2 * 400.0, "cost": kwh * 1.2 * 0.30, "currency": "EUR",
                "g_per_kwh": 400.0, "pue": 1.2, "region": "XX", "source": "stub", "year": 2024}


class RecordingWriter:
    """A SummaryWriter's add_scalar / add_text."""

    def __init__(self):
        self.scalars = []
        self.texts = []

    def add_scalar(self, tag, value, global_step=None):
        self.scalars.append((tag, value, global_step))

    def add_text(self, tag, text, global_step=None):
        self.texts.append((tag, text, global_step))


class RecordingMonitor:
    """A joule.Monitor that remembers every window it ended and every span it
    measured (the callbacks' phases: spans of its clock, not windows)."""

    def __init__(self, monitor):
        self._m = monitor
        self.ended = []
        self.spans = set()

    def end_window(self, name):
        m = self._m.end_window(name)
        self.ended.append(m)
        return m

    def measure_spans(self, begins_s, ends_s):
        self.spans.update(zip(begins_s, ends_s))
        return self._m.measure_spans(begins_s, ends_s)

    def measure_span(self, begin_s, end_s, name=""):
        self.spans.add((begin_s, end_s))
        return self._m.measure_span(begin_s, end_s, name)

    def phase_windows(self):
        """Every phase span measured (again) now, in time order."""
        return [self._m.measure_span(b, e) for b, e in sorted(self.spans)]

    def __getattr__(self, name):
        return getattr(self._m, name)


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")  # GPUs only
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monitor = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
    yield monitor


@pytest.fixture
def hf(monkeypatch):
    install_transformers(monkeypatch)
    import joule.hf

    return joule.hf


def run(hf, monitor, tmp_path, gpus=None, **options):
    """Trains on the stand-in; gpus: the simulated GPUs' monitor where monitor is None (the default one)."""
    gpus = monitor if gpus is None else gpus
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, num_train_epochs=2, logging_steps=2,
                             eval_strategy="steps", eval_steps=4, save_steps=5, run_name="standin",
                             include_num_input_tokens_seen="all")
    callback = hf.EnergyCallback(monitor, **options)
    trainer = Trainer(args, callbacks=[callback], monitor=gpus, tokens_per_step=512)
    gpus.begin_window("outer")
    trainer.train()
    outer = gpus.settle(gpus.end_window("outer"), 2.0)
    return trainer, callback, outer


def test_standin_trainer_logs_energy_through_report_to(sim, hf, tmp_path):
    rec = RecordingMonitor(sim)
    writer = RecordingWriter()
    carbon = StubCarbon()
    trainer, cb, outer = run(hf, rec, tmp_path, carbon=carbon, trackers=[writer])
    summary = cb.summary

    # The reporting integration (before joule in the list the Trainer built) saw joule's keys.
    assert trainer.callback_handler.callbacks[0] is cb
    logged = [logs for logs in trainer.reporter.logged if "joule/energy_j" in logs]
    assert len(logged) >= 4
    assert any("loss" in logs for logs in logged)
    assert any("joule/eval_energy_j" in logs for logs in logged)
    assert any("joule/save_energy_j" in logs for logs in logged)
    assert any("joule/epoch_energy_j" in logs for logs in logged)

    # What was logged plus what settled after the last log is every phase window, each once.
    remainder = cb.meter.take_interval()
    logged_j = sum(logs["joule/energy_j"] for logs in logged) + sum(t.energy_j for t in remainder.values())
    windows = rec.phase_windows()
    assert all(m.settled for m in windows)
    windows_j = sum(m.gpu_total_energy_j for m in windows)
    assert logged_j == pytest.approx(windows_j, rel=1e-9)
    assert summary["energy_j"] == pytest.approx(windows_j, rel=1e-9)
    assert summary["unsettled_windows"] == 0
    # ... and they cover the run: the callback's train window and the test's own outer window.
    assert summary["energy_j"] == pytest.approx(summary["train_window_energy_j"], rel=0.01)
    # The outer window also holds the callback's start and finish (its settling wait), outside
    # the run: what it holds beyond the run is no more than the GPUs can draw in that time (a
    # fixed 1% failed on a loaded machine, where that wait grows: 164.9 J outer, 163.2 J run).
    outside_j = outer.gpu_total_energy_j - summary["energy_j"]
    outside_s = outer.elapsed_s - summary["time_s"]
    limit_w = sum(gpu["power_limit_w"] for gpu in sim.gpus)
    assert outside_s >= 0
    assert -1e-3 * outer.gpu_total_energy_j <= outside_j <= outside_s * limit_w + 1e-3 * outer.gpu_total_energy_j
    assert sum(e["energy_j"] for e in summary["epochs"]) == pytest.approx(summary["energy_j"], rel=0.01)

    # Phases and the per-sample / per-token figures.
    phases = summary["phases"]
    assert phases["train_step"]["windows"] == 12
    assert phases["eval"]["windows"] == 3 and phases["save"]["windows"] == 3  # steps 4, 8, 12; 5, 10 and the last
    train_j = summary["energy_j"] - phases["eval"]["energy_j"] - phases["save"]["energy_j"]
    assert summary["samples"] == 12 * 4 * 2
    assert summary["tokens"] == 12 * 512
    assert summary["energy_per_sample_j"] == pytest.approx(train_j / (12 * 8))
    assert summary["energy_per_token_j"] == pytest.approx(train_j / (12 * 512))
    for logs in logged:
        assert logs["joule/power_w"] == pytest.approx(logs["joule/energy_j"] / logs["joule/time_s"])
    # Steps at full load draw more than the data loader's gaps.
    assert phases["train_step"]["average_power_w"] > phases["other"]["average_power_w"]

    # Carbon (a stand-in of joule.Carbon): the running total's footprint in each log, the run's in the summary.
    last = logged[-1]
    assert last["joule/co2e_g"] == pytest.approx(last["joule/total_energy_j"] / 3.6e6 * 1.2 * 400.0)
    assert last["joule/cost"] == pytest.approx(last["joule/total_energy_j"] / 3.6e6 * 1.2 * 0.30)
    assert summary["co2e_g"] == pytest.approx(summary["energy_j"] / 3.6e6 * 1.2 * 400.0)
    assert summary["carbon"]["currency"] == "EUR" and summary["currency"] == "EUR"

    # The summary file, and the extra tracker (a SummaryWriter).
    path = tmp_path / "out" / "joule_energy.json"
    assert cb.summary_path == str(path)
    on_disk = json.loads(path.read_text())
    assert on_disk["energy_j"] == pytest.approx(summary["energy_j"])
    assert on_disk["framework"] == "hf" and on_disk["run"] == "standin"
    scalars = [(tag, v) for tag, v, _ in writer.scalars if tag == "joule/energy_j"]
    assert [v for _, v in scalars] == [logs["joule/energy_j"] for logs in logged]
    assert writer.texts and writer.texts[0][0] == "joule/summary"


def test_standin_trainer_changes_no_gpu_setting_by_default(sim, hf, tmp_path):
    before = sim.gpus[0]["power_limit_w"]
    _, cb, _ = run(hf, sim, tmp_path)
    assert cb.run.optimizer is None
    assert cb.summary["power_limit"] is None
    assert sim.gpus[0]["power_limit_w"] == before


def test_standin_trainer_observer_optimizer(sim, hf, tmp_path):
    before = sim.gpus[0]["power_limit_w"]
    _, cb, _ = run(hf, sim, tmp_path, power_limit="observe")
    assert cb.run.optimizer is not None and cb.run.optimizer.observer
    assert cb.summary["power_limit"]["observer"] is True
    assert sim.gpus[0]["power_limit_w"] == before


def test_standin_trainer_default_monitor(monkeypatch, sim, hf, tmp_path):
    monkeypatch.setattr(joule.meter, "_default", sim)
    _, cb, _ = run(hf, None, tmp_path, gpus=sim)
    assert cb.run.monitor is sim
    assert cb.summary["energy_j"] > 0
    assert cb.summary["gpus"] == [sim.gpus[0]["name"]]


def test_standin_trainer_samples_from_arguments(sim, hf):
    cb = hf.EnergyCallback(sim)
    args = TrainingArguments(per_device_train_batch_size=16, gradient_accumulation_steps=4, world_size=8)
    from framework_standins import TrainerState

    assert cb._samples_per_step(args, TrainerState()) == 16 * 4 * 8
    assert cb._samples_per_step(args, TrainerState(train_batch_size=32)) == 32 * 4 * 8
    assert hf.EnergyCallback(sim, samples_per_step=7)._samples_per_step(args, TrainerState()) == 7


class FakeOptimizer:
    """Records the calls of a joule.PowerLimitOptimizer's training-loop callbacks."""

    def __init__(self, observer):
        self.observer = observer
        self.calls = []
        self.state = "observing"
        self.chosen_limit_w = None

    def __getattr__(self, name):
        if name.startswith("on_") or name == "restore":
            return lambda: self.calls.append(name)
        raise AttributeError(name)

    def report(self):
        return "fake"


class FakeRecurrence:
    """joule.torch.BatchSizeRecurrence's side the callback uses; the service says stop after 1 epoch."""

    def __init__(self):
        self.optimizer = None
        self.progress = []

    def make_power_limit_optimizer(self, **options):
        self.optimizer = FakeOptimizer(options["observer"])
        return self.optimizer

    def report_progress(self, epochs, energy_j=None, time_s=None):
        self.progress.append(epochs)
        return epochs >= 1


def test_standin_trainer_drives_a_recurrence_and_its_optimizer(sim, hf, tmp_path):
    rec = FakeRecurrence()
    trainer, cb, _ = run(hf, sim, tmp_path, recurrence=rec)
    assert rec.optimizer.observer  # observer mode unless power_limit="optimize"
    assert rec.progress == [1]  # the service said stop after the first epoch
    assert trainer.state.global_step == 6
    calls = rec.optimizer.calls
    assert calls.count("on_step_begin") == calls.count("on_step_end") == 6
    assert calls.count("on_epoch_begin") == calls.count("on_epoch_end") == 1
    assert calls[-1] == "restore"
    assert cb.summary["power_limit"]["observer"] is True
