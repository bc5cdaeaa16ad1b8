# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.lightning.EnergyCallback against a stand-in of Lightning 2.6
(framework_standins.py: the Callback hooks, LightningModule.log's signature
and where it may be called, the fit loop's hook order with a sanity check,
validation and checkpointing), on simulated GPUs. joule.torch.LightningCallback
(the optimizer callback) keeps working beside it."""
import json

import pytest

import joule
from framework_standins import LightningModule, LightningTrainer, install_lightning
from test_frameworks_hf import RecordingMonitor, StubCarbon


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    return joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)


@pytest.fixture
def pl(monkeypatch):
    install_lightning(monkeypatch)
    import joule.lightning

    return joule.lightning


def fit(pl, monitor, tmp_path, callbacks=(), **options):
    cb = pl.EnergyCallback(monitor, **options)
    trainer = LightningTrainer([cb, *callbacks], monitor=monitor, default_root_dir=str(tmp_path / "logs"))
    monitor.begin_window("outer")
    trainer.fit(LightningModule())
    outer = monitor.settle(monitor.end_window("outer"), 2.0)
    return trainer, cb, outer


STEP_KEYS = {"joule/step_energy_j", "joule/step_power_w", "joule/energy_per_sample_j", "joule/energy_per_token_j",
             "joule/total_energy_j", "joule/epoch_energy_j", "joule/co2e_g", "joule/cost"}


def joule_values(trainer):
    """(name, value) of every joule value that reached the logger during training (not the run summary)."""
    return [(name, value) for metrics, _ in trainer.logger.calls for name, value in metrics.items()
            if name.startswith("joule/") and not name.startswith("joule/run/")]


def test_standin_lightning_logs_to_the_loggers(sim, pl, tmp_path):
    rec = RecordingMonitor(sim)
    carbon = StubCarbon()
    trainer, cb, outer = fit(pl, rec, tmp_path, carbon=carbon)
    summary = cb.summary

    # Straight to the loggers (no pl_module.log: each would put a tensor on the GPU), under
    # the step the stand-in forwards Lightning's own values with, on the steps it forwards them.
    assert not [c for c in trainer.all_log_calls if c[1].startswith("joule/")]
    joule_steps = sorted({step for metrics, step in trainer.logger.calls
                          if "joule/total_energy_j" in metrics and "joule/run/energy_j" not in metrics})
    assert joule_steps == [s - 1 for s in range(1, 13) if s % trainer.log_every_n_steps == 0]
    calls = [("on_train_batch_end", name, value, True, False) for name, value in joule_values(trainer)]
    assert STEP_KEYS <= {name for _, name, _, _, _ in calls}
    totals = [m["joule/total_energy_j"] for m, _ in trainer.logger.calls if "joule/total_energy_j" in m]
    assert totals == sorted(totals)

    # Each logged step energy is one settled train-step window's energy.
    windows = rec.phase_windows()
    assert all(m.settled for m in windows)
    # (The spans carry no phase: each logged figure must be one of them, and 12 were train steps.)
    step_j = sorted(m.gpu_total_energy_j for m in windows)
    assert summary["phases"]["train_step"]["windows"] == 12
    for _, name, value, _, _ in calls:
        if name == "joule/step_energy_j":
            assert min(abs(value - j) for j in step_j) <= 1e-9 * value
    # Per sample and per token: batches of 4 x 16 tokens (attention_mask's sum).
    for _, name, value, _, _ in calls:
        if name == "joule/energy_per_sample_j":
            assert min(abs(value - j / 4) for j in step_j) <= 1e-9 * value
        if name == "joule/energy_per_token_j":
            assert min(abs(value - j / 64) for j in step_j) <= 1e-9 * value

    # The phases cover the run, each window once; the sanity check is not in it.
    assert summary["energy_j"] == pytest.approx(sum(m.gpu_total_energy_j for m in windows), rel=1e-9)
    assert summary["energy_j"] == pytest.approx(summary["train_window_energy_j"], rel=0.01)
    assert summary["phases"]["train_step"]["windows"] == 12
    assert summary["phases"]["eval"]["windows"] == 2
    assert summary["samples"] == 48 and summary["tokens"] == 48 * 16
    assert summary["co2e_g"] == pytest.approx(summary["energy_j"] / 3.6e6 * 1.2 * 400.0)
    assert len(summary["epochs"]) == 2

    # The summary file in log_dir, and the run's figures to the loggers at the end.
    on_disk = json.loads((tmp_path / "logs" / "joule_energy.json").read_text())
    assert on_disk["framework"] == "lightning"
    assert on_disk["energy_j"] == pytest.approx(summary["energy_j"])
    final, _ = trainer.logger.calls[-1]
    assert final["joule/run/energy_j"] == pytest.approx(summary["energy_j"])


def test_standin_lightning_module_log_logs_through_the_module(sim, pl, tmp_path):
    trainer, cb, _ = fit(pl, sim, tmp_path, module_log=True, carbon=StubCarbon())
    # Logged from on_train_batch_end with on_step=True (allowed there), and reaching the logger.
    calls = [c for c in trainer.all_log_calls if c[1].startswith("joule/")]
    assert calls and all(fx == "on_train_batch_end" and on_step for fx, _, _, on_step, _ in calls)
    assert STEP_KEYS <= {name for _, name, _, _, _ in calls}
    forwarded = [m for m, _ in trainer.logger.calls if "joule/total_energy_j" in m and "joule/run/energy_j" not in m]
    assert forwarded and all(STEP_KEYS - {"joule/epoch_energy_j"} <= set(m) for m in forwarded)


def test_standin_lightning_logs_only_on_the_steps_its_loggers_take(sim, pl, tmp_path):
    # Lightning forwards a step's logged values every log_every_n_steps and
    # drops the rest, and each pl_module.log of a number costs a copy to the
    # module's device: joule logs on the forwarded steps only.
    steps_logged = []

    class Module(LightningModule):
        def log(self, name, value, **options):
            if name.startswith("joule/"):
                steps_logged.append(self.trainer.global_step)
            super().log(name, value, **options)

    trainer = LightningTrainer([pl.EnergyCallback(sim, module_log=True)], monitor=sim,
                               default_root_dir=str(tmp_path / "logs"), log_every_n_steps=3)
    trainer.fit(Module())
    assert steps_logged and all(step % 3 == 0 for step in steps_logged), steps_logged
    forwarded = {step for metrics, step in trainer.logger.calls if "joule/total_energy_j" in metrics}
    assert forwarded == {step - 1 for step in steps_logged}  # the stand-in forwards at global_step - 1


def test_standin_lightning_sanity_check_outside_the_run(sim, pl, tmp_path):
    trainer, cb, outer = fit(pl, sim, tmp_path)
    # The sanity check's validation ran before on_train_start: the train window and the phases begin after it.
    assert cb.summary["energy_j"] < outer.gpu_total_energy_j
    assert cb.summary["time_s"] < outer.elapsed_s


def test_standin_lightning_beside_the_optimizer_callback(sim, pl, tmp_path):
    import importlib

    import joule.torch

    importlib.reload(joule.torch.callbacks)  # picks up the stand-in's Callback
    importlib.reload(joule.torch)
    before = sim.gpus[0]["power_limit_w"]
    plo = joule.PowerLimitOptimizer(sim, observer=True, warmup_steps=1, measure_steps=2, min_warmup_s=0.0,
                                    min_measure_s=0.0)
    trainer, cb, _ = fit(pl, sim, tmp_path, callbacks=[joule.torch.LightningCallback(plo)])
    assert cb.summary["energy_j"] > 0
    assert cb.run.optimizer is None  # the measuring callback changes nothing by default
    assert sim.gpus[0]["power_limit_w"] == before
    importlib.reload(joule.torch.callbacks)
    importlib.reload(joule.torch)


def test_standin_lightning_batch_counts(pl):
    import torch

    assert pl.batch_counts((torch.zeros(8, 3), torch.zeros(8))) == (8.0, 0.0)
    mask = torch.ones(2, 5)
    mask[1, 3:] = 0
    assert pl.batch_counts({"input_ids": torch.ones(2, 5, dtype=torch.long), "attention_mask": mask}) == (2.0, 8.0)
    assert pl.batch_counts({"input_ids": torch.ones(3, 7, dtype=torch.long)}) == (3.0, 21.0)
    assert pl.batch_counts("text") == (0.0, 0.0)
    assert pl.batch_counts([[torch.tensor(3.0)], {"x": torch.zeros(5, 2)}]) == (0.0, 0.0)  # a 0-d tensor first
    assert pl.batch_counts([[], {"x": torch.zeros(5, 2)}]) == (5.0, 0.0)


def test_standin_lightning_log_cadence_follows_the_logger_connectors_rule(pl):
    # LogCadence reads Lightning 2.6's counters directly; it must agree with
    # the logger connector's should_update_logs at every batch, stopping included.
    class Connector:
        def __init__(self, trainer):
            self.trainer = trainer

        @property
        def should_update_logs(self):  # Lightning 2.6: (batches that stepped + 1) % every == 0, or stopping
            step = self.trainer.fit_loop.epoch_loop._batches_that_stepped + 1
            return step % self.trainer.log_every_n_steps == 0 or self.trainer.should_stop

    class Trainer:
        def __init__(self, every):
            self.log_every_n_steps = every
            self.should_stop = False
            self.fit_loop = type("FitLoop", (), {})()
            self.fit_loop.epoch_loop = type("EpochLoop", (), {"_batches_that_stepped": 0})()
            self._logger_connector = Connector(self)

    for every in (1, 3, 5):
        trainer = Trainer(every)
        cadence = pl.LogCadence(trainer)
        taken = []
        for batch in range(40):
            trainer.should_stop = batch == 37
            assert cadence() == trainer._logger_connector.should_update_logs, (every, batch)
            taken.append(cadence())
            trainer.fit_loop.epoch_loop._batches_that_stepped += 1
        assert sum(taken) == len([b for b in range(40) if (b + 1) % every == 0 or b == 37])
    # Without Lightning's internals (an older or other trainer): the public rule, as loggers_take_this_step.
    bare = type("Bare", (), {"log_every_n_steps": 4, "global_step": 8, "should_stop": False})()
    assert pl.LogCadence(bare)() == pl.loggers_take_this_step(bare) is True
    bare.global_step = 9
    assert pl.LogCadence(bare)() == pl.loggers_take_this_step(bare) is False
