# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.BatchSizeClient and joule.torch.BatchSizeRecurrence against the real
`joule serve` (the server fixture in conftest.py: SQLite store in a temporary
directory, any free loopback port).
"""
import math
import re
import time

import subprocess

import pytest

import joule
import joule.torch


@pytest.fixture
def client(server):
    with joule.BatchSizeClient(server, timeout_s=5.0) as c:
        yield c


@pytest.fixture
def simulated(monkeypatch):
    """Two simulated GPUs drawing 650 W each."""
    monkeypatch.setenv("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("JOULE_SIM", "count=2,load=1")
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")


SIZES = [16, 32, 64, 128]


def limits_set(log):
    """The limits (W) set on the fake GPUs, in order."""
    if not log.exists():
        return []
    return [int(re.search(r"limit_mw=(\d+)", line).group(1)) // 1000 for line in log.read_text().splitlines()]


def register(client, name="bert", **overrides):
    args = dict(batch_sizes=SIZES, default_batch_size=32, max_power_w=300.0, eta=0.5, beta=2.0, seed=7)
    args.update(overrides)
    return client.register_job(name, **args)


def test_health_and_the_url_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("JOULE_SERVICE_URL", server)
    client = joule.BatchSizeClient()
    assert client.url == server
    health = client.health()
    assert health["status"] == "ok" and "jobs.db" in health["store"]
    monkeypatch.delenv("JOULE_SERVICE_URL")
    assert joule.BatchSizeClient().url == "http://127.0.0.1:8321"


def test_register_once_then_same_spec_then_conflict(client):
    assert register(client) is True
    assert register(client) is False
    with pytest.raises(joule.ServiceError) as e:
        register(client, beta=3.0)
    assert e.value.status == 409
    assert "bert" in str(e.value)
    job = client.job("bert")
    assert job["spec"]["batch_sizes"] == SIZES and job["spec"]["seed"] == 7
    assert job["phase"] == "pruning" and job["recurrences"] == 0
    assert [j["spec"]["name"] for j in client.jobs()] == ["bert"]


def test_ask_report_agrees_with_the_in_process_optimizer(client):
    register(client, window=None)
    bso = joule.BatchSizeOptimizer(SIZES, 32, beta=2.0, seed=7)
    # Energy and time per batch size, noisy; 16 never converges (and is
    # stopped early), 128 fails one run in three; 32 and 64 are close, so
    # Thompson sampling keeps trying both and the seed matters.
    energy = {16: 12000.0, 32: 5000.0, 64: 4900.0, 128: 5200.0}
    time_s = {16: 40.0, 32: 20.0, 64: 19.5, 128: 20.0}
    stopped = 0
    chosen = []
    for i in range(30):
        a = client.ask("bert", node=f"node-{i % 3}")
        assert a.batch_size == bso.predict(), f"recurrence {i}"
        assert a.early_stop_threshold_cost == bso.early_stop_threshold_cost
        assert a.power_limit_w is None
        b = a.batch_size
        chosen.append(b)
        e, t = energy[b] * (1 + 0.04 * ((i * 7) % 5)), time_s[b] * (1 + 0.03 * ((i * 3) % 4))
        reached = b != 16 and not (b == 128 and i % 3 == 0)
        measured = 0.5 * e + 0.5 * 300.0 * t
        early = not reached and measured >= a.early_stop_threshold_cost
        cost = client.report(a.recurrence_id, e, t, reached, stopped_early=early)
        expected = a.early_stop_threshold_cost if early else measured
        assert cost == pytest.approx(expected, rel=1e-12)
        bso.observe(b, expected, reached)
        stopped += early
    assert stopped > 0  # the stopped-early path was taken
    assert chosen[4:].count(32) and chosen[4:].count(64)  # sampled after pruning, not one size
    job = client.job("bert")
    assert job["recurrences"] == 30 and job["in_flight"] == 0
    assert job["phase"] == bso.phase == "thompson"
    exported = client.export_job("bert")
    assert len(exported["recurrences"]) == 30
    assert sum(r["stopped_early"] for r in exported["recurrences"]) == stopped


def test_errors_carry_the_status_and_the_services_message(client, tmp_path):
    with pytest.raises(joule.ServiceError) as e:
        client.ask("nobody")
    assert e.value.status == 404 and "no job 'nobody'" in str(e.value)
    for call in (lambda: client.job("nobody"), lambda: client.export_job("nobody")):
        with pytest.raises(joule.ServiceError, match="no job 'nobody'") as e:
            call()
        assert e.value.status == 404
    with pytest.raises(joule.ServiceError, match="no recurrence 987654") as e:
        client.report(987654, 1.0, 1.0, True)
    assert e.value.status == 404
    with pytest.raises(joule.ServiceError) as e:
        client.register_job("bad", [], 32, max_power_w=300.0)
    assert e.value.status == 400 and "batch_sizes" in str(e.value)

    register(client)
    a = client.ask("bert")
    client.report(a.recurrence_id, 100.0, 1.0, True)
    with pytest.raises(joule.ServiceError, match="already reported") as e:
        client.report(a.recurrence_id, 100.0, 1.0, True)
    assert e.value.status == 409

    # Nothing listening: status 0.
    nobody = joule.BatchSizeClient("http://127.0.0.1:1", timeout_s=1.0)
    with pytest.raises(joule.ServiceError, match="no answer") as e:
        nobody.health()
    assert e.value.status == 0
    with pytest.raises(joule.ServiceError):
        joule.BatchSizeClient("ftp://example")


def test_a_power_profile_gives_later_recurrences_a_limit(client):
    register(client, gpu_model="NVIDIA A100-SXM4-40GB")
    first = client.ask("bert")
    assert first.power_limit_w is None
    for b in SIZES:  # the lowest limit is both cheapest and fast enough here
        client.put_power_profile("bert", "NVIDIA A100-SXM4-40GB", b, [
            {"power_limit_w": 200.0, "time_per_epoch_s": 10.0, "avg_power_w": 190.0},
            {"power_limit_w": 300.0, "time_per_epoch_s": 9.8, "avg_power_w": 290.0},
        ])
    assert client.ask("bert").power_limit_w == 200.0
    with pytest.raises(joule.ServiceError) as e:
        client.put_power_profile("bert", "NVIDIA A100-SXM4-40GB", 48, [])
    assert e.value.status == 400


def test_recurrence_helper_measures_with_a_monitor(client, simulated):
    register(client)
    monitor = joule.Monitor(interval_ms=10)
    assert monitor.simulated
    with joule.torch.BatchSizeRecurrence(client, "bert", node="worker", monitor=monitor) as rec:
        assert rec.batch_size in SIZES and rec.power_limit_w is None
        assert math.isinf(rec.early_stop_threshold_cost)
        time.sleep(0.1)
        assert not rec.should_stop()  # no threshold yet
        time.sleep(0.1)
        cost = rec.finish(reached_target=True)
    r = client.export_job("bert")["recurrences"][0]
    assert r["id"] == rec.recurrence_id and r["node"] == "worker" and r["reached_target"] is True
    assert r["time_s"] >= 0.2 and r["energy_j"] > 0
    assert r["energy_j"] == pytest.approx(2 * 650.0 * r["time_s"], rel=0.05)
    assert cost == pytest.approx(0.5 * r["energy_j"] + 0.5 * 300.0 * r["time_s"])
    with pytest.raises(RuntimeError, match="already finished"):
        rec.finish(reached_target=True)


def test_recurrence_helper_stops_early_past_the_threshold(client, simulated):
    register(client)
    first = client.ask("bert")
    client.report(first.recurrence_id, 10.0, 0.01, True)  # cost 6.5: threshold 13
    monitor = joule.Monitor(interval_ms=10)
    with joule.torch.BatchSizeRecurrence(client, "bert", monitor=monitor) as rec:
        assert rec.early_stop_threshold_cost == pytest.approx(13.0)
        assert rec.cost_of(20.0, 0.03) == pytest.approx(10.0 + 4.5)  # 0.5 E + 0.5 x 300 W x T
        assert not rec.should_stop(energy_j=20.0, time_s=0.01)  # 11.5
        assert rec.should_stop(energy_j=20.0, time_s=0.03)  # 14.5: the time term counts
        time.sleep(0.1)  # 2 GPUs x 650 W x 0.1 s: ~65 J in the cost
        assert rec.should_stop()
        cost = rec.finish(reached_target=False)
    assert cost == pytest.approx(13.0)  # a run stopped early costs its threshold
    r = client.export_job("bert")["recurrences"][1]
    assert r["stopped_early"] is True and r["reached_target"] is False and r["energy_j"] > 0


def test_progress_reports_are_kept_and_answered(client, simulated):
    register(client)
    first = client.ask("bert")
    advice = client.progress(first.recurrence_id, 1, 4.0, 0.01)
    assert advice.stop is False and advice.threshold_cost == math.inf  # no threshold yet
    assert advice.cost == pytest.approx(0.5 * 4.0 + 0.5 * 300.0 * 0.01)
    client.report(first.recurrence_id, 10.0, 0.01, True)  # cost 6.5: threshold 13
    with pytest.raises(joule.ServiceError) as e:
        client.progress(first.recurrence_id, 2, 1.0, 1.0)
    assert e.value.status == 409
    monitor = joule.Monitor(interval_ms=10)
    with joule.torch.BatchSizeRecurrence(client, "bert", monitor=monitor) as rec:
        assert not rec.report_progress(1, energy_j=20.0, time_s=0.01)  # 11.5 < 13
        time.sleep(0.1)  # 2 GPUs x 650 W x 0.1 s: ~65 J in the cost
        assert rec.report_progress(2)  # measured by the monitor: past 13
        exported = client.export_job("bert")["recurrences"][1]
        assert exported["progress_epochs"] == 2 and exported["progress_cost"] > 13.0
        rec.finish(reached_target=False)


def test_recurrence_helper_without_monitor_and_on_exceptions(client):
    register(client, eta=1.0)
    with joule.torch.BatchSizeRecurrence(client, "bert") as rec:
        with pytest.raises(ValueError, match="pass energy_j and time_s"):
            rec.should_stop()
        assert rec.finish(True, energy_j=500.0, time_s=3.0) == pytest.approx(500.0)
    with pytest.raises(ZeroDivisionError):
        with joule.torch.BatchSizeRecurrence(client, "bert") as rec:
            1 / 0
    job = client.job("bert")
    assert job["recurrences"] == 2 and job["in_flight"] == 1  # the failed run reported nothing


def profile_then_train(rec, steps=60, step_s=0.02):
    """A training loop of steps that only take time, with the recurrence's
    power-limit optimizer (quick profiling: 4 steps per limit)."""
    plo = rec.make_power_limit_optimizer(step_w=50, warmup_steps=1, measure_steps=3, min_warmup_s=0,
                                         min_measure_s=0, screening_rounds=2, confirming_rounds=0)
    callbacks = joule.torch.TrainingCallbacks(plo)
    with callbacks.epoch():
        for _ in range(steps):
            with callbacks.step():
                time.sleep(step_s)
    return plo


def test_a_recurrence_publishes_its_profile_and_the_next_one_starts_from_it(client, fake_gpus):
    register(client, gpu_model="NVIDIA A40", max_power_w=300.0)
    monitor = joule.Monitor(interval_ms=5)
    with joule.torch.BatchSizeRecurrence(client, "bert", node="a", monitor=monitor) as first:
        assert first.power_limit_w is None and first.gpu_model == "NVIDIA A40"
        plo = profile_then_train(first)
        assert plo.state == "decided" and not plo.from_caller and first.profile_published is True
        # Per GPU: each of the two fake GPUs draws what its limit allows.
        for entry in first.profile_entries(plo.profile):
            assert entry["avg_power_w"] == pytest.approx(entry["power_limit_w"], rel=0.05)
        chosen = plo.chosen_limit_w
        first.finish(reached_target=True)
    assert limits_set(fake_gpus)[-2:] == [300, 300]  # put back when the run ended

    # The service's argmin over the published entries (per GPU, time per step)
    # is the optimizer's own choice; only that batch size has a profile.
    later = [client.ask("bert") for _ in range(6)]
    for a in later:
        assert a.power_limit_w == (chosen if a.batch_size == first.batch_size else None), a
    assert any(a.power_limit_w is not None for a in later)
    # While an exploration (16) is out, the service hands out the best size
    # known: the profiled one, with its limit. Training starts there.
    calls_before = len(limits_set(fake_gpus))
    with joule.torch.BatchSizeRecurrence(client, "bert", node="b", monitor=monitor) as rec:
        assert rec.batch_size == first.batch_size and rec.power_limit_w == chosen
        plo = profile_then_train(rec, steps=20)
        assert plo.from_caller and plo.profile == [] and plo.chosen_limit_w == chosen
        rec.finish(reached_target=True)
    assert rec.profile_published is None  # nothing measured, nothing published
    changes = limits_set(fake_gpus)[calls_before:]
    assert changes == ([chosen] * 2 + [300] * 2 if chosen != 300 else []), changes


def test_each_gpu_model_gets_and_publishes_its_own_profile(client, fake_gpus):
    register(client, gpu_model="NVIDIA A100-SXM4-40GB")
    for b in SIZES:
        client.put_power_profile("bert", "NVIDIA A100-SXM4-40GB", b, [
            {"power_limit_w": 250.0, "time_per_epoch_s": 1.0, "avg_power_w": 240.0}])
    monitor = joule.Monitor(interval_ms=5)
    # This node has A40s: the A100 profile is not its advice; it profiles and
    # publishes under its own model.
    with joule.torch.BatchSizeRecurrence(client, "bert", monitor=monitor) as rec:
        assert rec.gpu_model == "NVIDIA A40" and rec.power_limit_w is None
        plo = profile_then_train(rec)
        assert not plo.from_caller and plo.state == "decided" and rec.profile_published is True
        rec.finish(reached_target=True)
    assert client.ask("bert").power_limit_w == 250.0  # the spec's model: the A100 profile, untouched
    for b in SIZES:  # whatever size comes next: each model gets its own profile's limit
        client.put_power_profile("bert", "NVIDIA A40", b, [
            {"power_limit_w": 225.0, "time_per_epoch_s": 1.0, "avg_power_w": 220.0}])
    assert client.ask("bert", gpu_model="NVIDIA A40").power_limit_w == 225.0
    assert client.ask("bert", gpu_model="NVIDIA A100-SXM4-40GB").power_limit_w == 250.0
    assert client.ask("bert", gpu_model="NVIDIA H100").power_limit_w is None


def test_ask_fields_of_the_wrong_type_are_400s(client):
    register(client)
    for body in ({"gpu_model": 40}, {"node": ["a"]}):
        with pytest.raises(joule.ServiceError, match="must be a string") as e:
            client._call("POST", "/v1/jobs/bert/recurrences", body)
        assert e.value.status == 400
    assert client.job("bert")["recurrences"] == 0


def test_a_recurrence_in_observer_mode_publishes_nothing(client, fake_a40s, tmp_path, monkeypatch):
    no_permission = "error function=nvmlDeviceSetPowerManagementLimit device=0 code=4\n"  # NVML_ERROR_NO_PERMISSION
    for name, value in fake_a40s(tmp_path / "observer", extra=no_permission).items():
        monkeypatch.setenv(name, value)
    register(client, gpu_model="NVIDIA A40")
    monitor = joule.Monitor(interval_ms=5)
    with joule.torch.BatchSizeRecurrence(client, "bert", monitor=monitor) as rec:
        with pytest.warns(RuntimeWarning, match="observer mode .* not published"):
            plo = profile_then_train(rec)
        assert plo.observer and plo.state == "decided" and rec.profile_published is False
        rec.finish(reached_target=True)
    later = [client.ask("bert") for _ in range(2)]  # an exploration, then the size just run
    assert rec.batch_size in [a.batch_size for a in later]
    assert [a.power_limit_w for a in later] == [None, None]
    assert limits_set(tmp_path / "observer" / "set_calls.log") == []


def test_power_limit_optimizer_needs_a_monitor_and_an_entered_recurrence(client):
    register(client)
    rec = joule.torch.BatchSizeRecurrence(client, "bert")
    with pytest.raises(ValueError, match="needs a monitor"):
        rec.make_power_limit_optimizer()


def test_tokens_from_the_argument_or_the_environment(tmp_path, monkeypatch):
    from conftest import joule_binary, serve

    tokens = tmp_path / "tokens"

    def create(user, jobs):
        done = subprocess.run([joule_binary(), "tokens", "create", "--file", str(tokens), "--user", user,
                               "--jobs", jobs], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    alice, admin = create("alice", "a*"), create("admin", "*")
    for url in serve(tmp_path, "--tokens", str(tokens), "--require-token"):
        monkeypatch.delenv("JOULE_SERVICE_TOKEN", raising=False)
        with pytest.raises(joule.ServiceError) as e:
            joule.BatchSizeClient(url).jobs()
        assert e.value.status == 401 and "token" in str(e.value)
        spec = {"batch_sizes": [32, 64], "default_batch_size": 64, "max_power_w": 300}
        joule.BatchSizeClient(url, token=admin).register_job("b1", **spec)
        monkeypatch.setenv("JOULE_SERVICE_TOKEN", alice)
        client = joule.BatchSizeClient(url)
        client.register_job("a1", **spec)
        with pytest.raises(joule.ServiceError) as e:
            client.ask("b1")
        assert e.value.status == 403
        assert [j["spec"]["name"] for j in client.jobs()] == ["a1"]
        with pytest.raises(joule.ServiceError) as e:
            joule.BatchSizeClient(url, token="").jobs()  # "" overrides the environment
        assert e.value.status == 401
