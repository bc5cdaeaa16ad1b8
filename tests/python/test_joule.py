# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The joule Python module with Debian's python3 and python3-torch (CPU).

Run by CTest with PYTHONPATH pointing at the build tree's package and
JOULE_TEST_FAKE_NVML at the fake libnvidia-ml.so.1.
"""
import gc
import json
import os
import subprocess
import re
import time
import weakref

import pytest
import torch

import joule
import joule.torch

FAKE_NVML = os.environ["JOULE_TEST_FAKE_NVML"]


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setenv("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("JOULE_SIM", "count=2,load=1")
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")


def test_window_context_manager_measures_energy_and_time(simulated):
    monitor = joule.Monitor(interval_ms=10)
    assert monitor.simulated and len(monitor.gpus) == 2
    with monitor.window("epoch") as w:
        time.sleep(0.2)
    m = w.measurement
    assert m.name == "epoch"
    assert m.elapsed_s >= 0.2
    assert len(m.gpu_energy_j) == 2
    assert m.gpu_energy_j[0] == pytest.approx(650.0 * m.elapsed_s, rel=0.02)
    assert m.total_energy_j == pytest.approx(sum(m.gpu_energy_j))


def test_both_windows_read_alike_open_and_ended(simulated):
    """Monitor.window() and joule.window() give one type, read the same way:
    running estimates while open, settled values after."""
    monitor = joule.Monitor(interval_ms=10, backend="sim")
    for w in (monitor.window("epoch"), joule.window("epoch", monitor)):
        assert isinstance(w, joule.Window)
        with w:
            time.sleep(0.15)
            assert w.open and 0 < w.energy_so_far_j == pytest.approx(sum(w.gpu_energy_j), rel=0.05)
            assert w.elapsed_s >= 0.15 and w.average_power_w == pytest.approx(1300.0, rel=0.05)
            with pytest.raises(joule.UsageError, match="has not ended"):
                w.settled()
        assert not w.open and w.measurement.settled and w.settled(timeout_s=5.0) is w.measurement
        assert w.energy_j == pytest.approx(sum(w.gpu_energy_j)) and len(w.gpu_energy_j) == 2
        assert w.gpu_energy_j[0] == pytest.approx(650.0 * w.elapsed_s, rel=0.02)
        assert w.elapsed_s == w.measurement.elapsed_s >= 0.15
    # Monitor.window keeps the name given; joule.window makes it unique so that windows of one name may overlap.
    with monitor.window("epoch") as exact, joule.window("epoch", monitor) as unique:
        pass
    assert exact.measurement.name == "epoch" and unique.measurement.name.startswith("epoch#")


def test_the_version_is_the_programs(simulated):
    done = subprocess.run([os.environ["JOULE_TEST_BINARY"], "--version"], capture_output=True, text=True, check=True)
    assert joule.__version__ and done.stdout.split() == ["joule", joule.__version__]


def test_simulated_gpus_in_place_of_a_missing_driver_are_said(simulated):
    with pytest.warns(RuntimeWarning, match="GPUs are SIMULATED"):
        joule.Monitor()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert joule.Monitor(backend="sim").simulated  # asked for: nothing to say


def use_fake_h100(monkeypatch, tmp_path, extra=""):
    """One fake H100 drawing 300 W that keeps 20 ms power samples, as the
    real one does; extra adds to its device line."""
    config = tmp_path / "fake.conf"
    config.write_text('device name="NVIDIA H100 80GB HBM3" power_w=300 min_limit_w=200 max_limit_w=700 '
                      f'sample_ms=20 sample_buffer=120 sample_prefill=1 {extra}\n')
    monkeypatch.setenv("JOULE_NVML_LIBRARY", FAKE_NVML)
    monkeypatch.setenv("JOULE_FAKE_NVML_CONFIG", str(config))
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")


def test_an_interval_out_of_range_is_named_in_the_units_given():
    """interval_ms is checked in milliseconds, with the CLI's range."""
    with pytest.raises(joule.UsageError, match=re.escape("interval_ms: 0.2 is outside [0.5, 3600000] (milliseconds)")):
        joule.Monitor(interval_ms=0.2, backend="sim")
    assert joule.Monitor(interval_ms=0.5, backend="sim").simulated


def test_a_power_limit_fact_the_driver_refuses_is_none_and_said(monkeypatch, tmp_path):
    """joule.devices() reports a refused reading as joule info and jouled do:
    that fact None, the others kept, the driver's message in power_limit_error."""
    use_fake_h100(monkeypatch, tmp_path, "limit_w=650")
    [gpu] = joule.devices()["gpus"]
    assert gpu["power_limit_w"] == 650.0 and gpu["power_limit_error"] is None
    config = tmp_path / "fake.conf"
    config.write_text(config.read_text() + "error function=nvmlDeviceGetPowerManagementLimit device=0 code=3\n")
    [gpu] = joule.devices()["gpus"]
    assert gpu["power_limit_w"] is None
    assert gpu["default_limit_w"] == 700.0 and gpu["min_limit_w"] == 200.0 and gpu["max_limit_w"] == 700.0
    assert gpu["power_limit_error"].startswith("limit: ") and "nvmlDeviceGetPowerManagementLimit" in gpu["power_limit_error"]


def test_settled_values_from_the_drivers_power_samples(monkeypatch, tmp_path):
    """A fake H100 that keeps 20 ms power samples, as the real one does."""
    use_fake_h100(monkeypatch, tmp_path)
    assert "driver power samples every 20 ms" in joule.devices()["gpus"][0]["energy_method"]
    monitor = joule.Monitor()
    monitor.begin_window("step")
    time.sleep(0.3)
    immediate = monitor.end_window("step")
    settled = monitor.settle(immediate, timeout_s=5.0)
    assert settled.settled and settled.name == "step"
    assert settled.begin_s == immediate.begin_s and settled.end_s == pytest.approx(immediate.end_s)
    [source] = settled.gpu_sources
    assert source.method == "power-samples" and source.calibration_scale > 0
    assert settled.gpu_energy_j[0] == pytest.approx(300.0 * settled.elapsed_s, rel=0.01)
    monitor.begin_window("again")
    m = monitor.end_window("again")
    assert ("not settled" in repr(m)) == (not m.settled)
    assert monitor.settle(m, timeout_s=5.0).settled
    assert monitor.refresh(m).settled
    monitor.begin_window("once")
    assert monitor.end_window_settled("once", timeout_s=5.0).settled


def test_windows_anchored_to_the_energy_counter(monkeypatch, tmp_path):
    """A fake H100 whose counter steps every 100 ms (4 ms per read): after the
    first window edge joule finds the steps, and later windows are pinned to
    them (bounded retries: a loaded machine can delay the search)."""
    use_fake_h100(monkeypatch, tmp_path, "energy_update_ms=100 energy_call_ms=4")
    assert "windows pinned to the counter's steps" in joule.devices()["gpus"][0]["energy_method"]
    monitor = joule.Monitor()
    try:
        anchored = []
        for attempt in range(14):
            monitor.begin_window(f"w{attempt}")
            time.sleep(0.4)
            m = monitor.end_window_settled(f"w{attempt}", timeout_s=5.0)
            assert m.settled
            if m.gpu_sources[0].counter_anchored:
                anchored.append(m)
            if len(anchored) == 4:
                break
        assert anchored, monitor.gpus
        assert "counter-anchored" in repr(anchored[-1].gpu_sources[0])
        # Wall-clock fake: on a starved machine (CI runs tests side by side)
        # reads are stretched and a young grid (its first second) may be off by
        # up to the 15 ms margin over a window (3.75% of this one); the grid a
        # few windows on is within a ms. The exact bounds are the
        # virtual-clock C++ tests' (counter_anchors_test, window_accuracy_test);
        # this one checks the path through Python.
        last = anchored[-1]
        assert last.gpu_energy_j[0] == pytest.approx(300.0 * last.elapsed_s, rel=0.02)
    finally:
        # A failure's traceback would keep the monitor, and with it the fake
        # NVML's configuration, alive into the next test.
        del monitor


def test_a_monitor_says_how_it_obtains_each_gpus_energy(monkeypatch, tmp_path):
    """Monitor.energy_method(gpu): the method in words, this monitor's (its
    calibration, whether its windows are pinned to counter steps yet); a GPU
    it lacks is refused by name."""
    use_fake_h100(monkeypatch, tmp_path, "energy_update_ms=100 energy_call_ms=4")
    monitor = joule.Monitor()
    try:
        assert monitor.energy_method(0).startswith("driver power samples every 20 ms")
        for _ in range(50):  # bounded: a loaded machine can delay the grid search
            if "windows anchored to energy-counter steps" in monitor.energy_method(0):
                break
            time.sleep(0.1)
        assert "windows anchored to energy-counter steps every" in monitor.energy_method(0)
        with pytest.raises(joule.UsageError, match=re.escape("energy_method: GPU 1 does not exist (the monitor has 1)")):
            monitor.energy_method(1)
    finally:
        del monitor


def test_the_counter_read_every_step_goes_into_an_attribution(monkeypatch, tmp_path):
    """Monitor.read_counter_every_step on a fake H100 (counter steps every
    100 ms): while on, the counter is read once a step and joule.attribute
    fits its increments with the samples (a note says how many;
    counter_increments=False leaves them out). Each True wants its own
    False, and joule.torch.attribute(read_counter=True) turns it off again
    when its session ends."""
    use_fake_h100(monkeypatch, tmp_path, "energy_update_ms=100 energy_call_ms=4")
    monitor = joule.Monitor()
    try:
        for _ in range(50):  # bounded: a loaded machine can delay the grid search
            if "windows anchored to energy-counter steps" in monitor.energy_method(0):
                break
            time.sleep(0.1)
        recorder = joule.RegionRecorder(monitor)
        monitor.read_counter_every_step(True)
        monitor.begin_window("w")
        stop = time.monotonic() + 3.0
        while time.monotonic() < stop:
            with recorder.region("a"):
                time.sleep(0.013)
            with recorder.region("b"):
                time.sleep(0.007)
        m = monitor.end_window("w")
        monitor.read_counter_every_step(False)
        off_too_often = "counter reads every step: turned off more often than turned on"
        with pytest.raises(joule.UsageError, match=off_too_often):
            monitor.read_counter_every_step(False)
        m = monitor.settle(m, timeout_s=5.0)
        values = monitor.counter_values(0, m.begin_s, m.end_s)
        assert len(values) >= 16, values
        assert all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(values, values[1:])), values
        with pytest.raises(joule.UsageError, match=re.escape("counter_values: GPU 1 does not exist")):
            monitor.counter_values(1, m.begin_s, m.end_s)
        fitted = joule.attribute(monitor, m, recorder, bootstrap_rounds=0)[0]
        notes = [n for n in fitted.notes if "energy-counter increments fitted with the samples" in n]
        assert notes, fitted.notes
        increments = int(notes[0].split()[0])
        assert increments >= 15, notes  # ~30 in 3 s; fewer where a loaded machine delays reads
        assert increments <= len(values) - 1
        alone = joule.attribute(monitor, m, recorder, bootstrap_rounds=0, counter_increments=False)[0]
        assert not any("energy-counter increments" in n for n in alone.notes), alone.notes
        assert fitted.observations == alone.observations + increments
        lagged = joule.attribute(monitor, m, recorder, bootstrap_rounds=0, counter_lag_ms=20)[0]
        assert any("20 ms behind the work (given)" in n for n in lagged.notes), lagged.notes
        # The same from the data kept, as a refit offline would have them.
        kept = joule.attribute_data(monitor.observed_power(0, m.begin_s, m.end_s), values,
                                    recorder.intervals(m.begin_s, m.end_s), m.begin_s, m.end_s, m.gpu_energy_j[0],
                                    bootstrap_rounds=0)
        assert [r.name for r in kept.regions] == [r.name for r in fitted.regions]
        assert [r.energy_j for r in kept.regions] == pytest.approx([r.energy_j for r in fitted.regions], rel=1e-9)
        assert kept.notes == fitted.notes
        with pytest.raises(joule.UsageError, match=re.escape("attribute_data: an interval is (name, begin_s")):
            joule.attribute_data([], [], [("a", 0.0, 1.0)], 0.0, 1.0, 1.0)
        with pytest.raises(joule.UsageError, match="is not an interval"):
            joule.attribute_data([], [], [], 1.0, 1.0, 1.0)

        model = torch.nn.Linear(4, 4)
        with joule.torch.attribute(model, monitor, clock="host", read_counter=True) as session:
            model(torch.zeros(1, 4))
        with pytest.raises(joule.UsageError, match=off_too_often):
            monitor.read_counter_every_step(False)
    finally:
        # Whatever holds the monitor (the recorder, the session) goes with it:
        # it keeps the fake NVML's configuration alive into the next test.
        recorder = session = None
        del monitor
        gc.collect()


def test_errors_are_python_exceptions_with_the_same_message(simulated):
    monitor = joule.Monitor()
    with pytest.raises(joule.UsageError, match="measurement window 'nope' is not open"):
        monitor.end_window("nope")
    with pytest.raises(joule.UsageError, match="GPU index 9 does not exist"):
        joule.Monitor(gpus=[9])
    with pytest.raises(joule.UsageError, match="unknown objective 'speed'"):
        joule.PowerLimitOptimizer(monitor, objective="speed")
    assert issubclass(joule.DeviceError, joule.Error) and issubclass(joule.Error, RuntimeError)


def test_devices_describe_what_joule_finds(fake_gpus):
    info = joule.devices()
    assert info["gpu_backend"] == "nvml" and not info["simulated"]
    assert [g["name"] for g in info["gpus"]] == ["NVIDIA A40", "NVIDIA A40"]
    assert info["gpus"][0]["max_limit_w"] == 300.0
    assert info["gpus"][0]["capabilities"]["energy_counter"][0] is True


def test_pytorch_training_loop_with_the_power_limit_optimizer(fake_driver_gpus):
    """A real (small, synthetic-data) PyTorch loop on CPU, with Monitor and the optimizer."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 32), torch.randint(0, 4, (256,))

    monitor = joule.Monitor(interval_ms=5, synchronize=joule.torch.synchronizer())
    # Two rounds exactly (two screening rounds, none confirming): a loaded test machine's timing
    # noise must not add more to the set-calls checked below.
    plo = joule.PowerLimitOptimizer(monitor, objective="energy", step_w=50, warmup_steps=1, measure_steps=4,
                                    min_warmup_s=0, min_measure_s=0, job="tiny-mlp", batch_size=32,
                                    screening_rounds=2, confirming_rounds=0)
    callbacks = joule.torch.TrainingCallbacks(plo)
    with torch.no_grad():
        loss_before = torch.nn.functional.cross_entropy(model(x), y).item()
    for _ in range(5):
        with monitor.window("epoch") as epoch, callbacks.epoch():
            for i in range(0, 256, 32):
                with callbacks.step():
                    loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    # The fake GPUs "work" while the step runs: 20 ms steps, so that a
                    # loaded machine's scheduling noise cannot swap the candidates
                    # (with 3 ms steps it chose 250 W under parallel builds).
                    time.sleep(0.02)
        assert epoch.measurement.gpu_total_energy_j > 0
    with torch.no_grad():
        assert torch.nn.functional.cross_entropy(model(x), y).item() < loss_before  # it really trained
    assert plo.state == "decided"
    assert plo.chosen_limit_w == 200.0  # power is capped by each limit; time does not change
    assert [row["power_limit_w"] for row in plo.profile] == [300.0, 250.0, 200.0]
    assert "chose 200 W" in plo.report()
    plo.restore()
    # Two rounds (300 W, the limit in force, is not set in the first), then the
    # choice (200 W, in force already), then the restore.
    assert fake_driver_gpus.driver.limits_set_w(fake_driver_gpus.log) == \
        [250] * 2 + [200] * 2 + [300] * 2 + [250] * 2 + [200] * 2 + [300] * 2


def fake_steps(plo, steps, step_s=0.02):
    """Training steps that only take time (the fake GPUs draw their power)."""
    for _ in range(steps):
        plo.on_step_begin()
        time.sleep(step_s)
        plo.on_step_end()


def test_power_limit_optimizer_tunes_the_sm_clock_cap_when_asked(fake_driver_gpus):
    # The fake GPUs' core clocks: 210-1000 MHz (750 among them); caps down to half of 1000 MHz.
    monitor = joule.Monitor(interval_ms=5)
    plo = joule.PowerLimitOptimizer(monitor, objective="energy", knob="sm_clock", step_mhz=250, warmup_steps=1,
                                    measure_steps=4, min_warmup_s=0, min_measure_s=0, noise_aware=False)
    assert plo.knob == "sm_clock" and plo.candidates == [1000.0, 750.0] and plo.candidate_limits_w == []
    fake_steps(plo, 30)
    assert plo.state == "decided" and plo.chosen_limit_w is None
    assert plo.chosen_setting == 750.0  # the power falls with the cube of the clock; time does not change here
    assert [row["clock_mhz"] for row in plo.profile] == [1000.0, 750.0]
    assert "chose SM clock cap 750 MHz" in plo.report()
    plo.restore()
    driver = fake_driver_gpus.driver
    assert fake_driver_gpus.log.read_text().splitlines() == [
        *driver.clock_lock_lines(0, 750), *driver.clock_lock_lines(1, 750),
        *driver.clock_reset_lines(0), *driver.clock_reset_lines(1),
    ]
    with pytest.raises(joule.UsageError, match="unknown optimizer knob 'core_clock'"):
        joule.PowerLimitOptimizer(monitor, knob="core_clock")


def test_power_limit_optimizer_hands_its_profile_over_and_starts_from_a_known_one(fake_driver_gpus):
    monitor = joule.Monitor(interval_ms=5)
    handed = []
    states = []

    def on_profiled(rows):
        # A weak reference: the optimizer holds the callback, and Python cannot
        # collect a cycle through it.
        states.append(plo_ref().state)  # asking works: called outside the optimizer's lock
        handed.append(rows)

    # 8 steps a candidate: 4 let a loaded machine's late wake-ups from the steps'
    # sleeps swap the candidates (2 runs of 8 chose 300 W beside a distributed job).
    quick = dict(objective="energy", step_w=50, warmup_steps=1, measure_steps=8, min_warmup_s=0, min_measure_s=0,
                 screening_rounds=2, confirming_rounds=0)
    plo = joule.PowerLimitOptimizer(monitor, on_profiled=on_profiled, **quick)
    plo_ref = weakref.ref(plo)
    plo.on_epoch_begin()
    fake_steps(plo, 70)
    assert len(handed) == 1 and handed[0] == plo.profile and states == ["decided"]
    assert [r["power_limit_w"] for r in handed[0]] == [300.0, 250.0, 200.0]
    assert plo.chosen_limit_w == 200.0 and not plo.from_caller
    plo.restore()

    # The rows as they came (or without steps and avg_power_w) decide at once.
    rows = [{k: r[k] for k in ("power_limit_w", "time_per_step_s", "energy_per_step_j")} for r in handed[0]]
    again = joule.PowerLimitOptimizer(monitor, known_profile=rows, on_profiled=handed.append, **quick)
    assert again.state == "decided" and again.from_caller and again.chosen_limit_w == 200.0
    fake_steps(again, 5)
    assert len(handed) == 1
    with pytest.raises(joule.UsageError, match="row 0: no 'time_per_step_s'"):
        joule.PowerLimitOptimizer(monitor, known_profile=[{"power_limit_w": 250.0}])


def test_power_limit_optimizer_with_a_known_limit_sets_only_that_one(fake_driver_gpus):
    monitor = joule.Monitor(interval_ms=5)
    plo = joule.PowerLimitOptimizer(monitor, known_limit_w=250.0, min_warmup_s=0, min_measure_s=0)
    assert plo.state == "decided" and plo.from_caller and plo.profile == []
    fake_steps(plo, 10, step_s=0.001)
    assert "(limit from the caller)" in plo.report()
    plo.restore()
    limits_set_w = fake_driver_gpus.driver.limits_set_w
    assert limits_set_w(fake_driver_gpus.log) == [250, 250, 300, 300]
    with pytest.raises(joule.UsageError, match="outside the GPUs' limit range 200-300 W"):
        joule.PowerLimitOptimizer(monitor, known_limit_w=350.0)
    observer = joule.PowerLimitOptimizer(monitor, known_limit_w=200.0, observer=True)
    fake_steps(observer, 5, step_s=0.001)
    assert limits_set_w(fake_driver_gpus.log) == [250, 250, 300, 300]  # nothing more


def test_what_on_profiled_raises_comes_out_of_on_step_end(fake_driver_gpus):
    monitor = joule.Monitor(interval_ms=5)

    def refuse(rows):
        raise KeyError("no service")

    plo = joule.PowerLimitOptimizer(monitor, step_w=50, warmup_steps=0, measure_steps=1, min_warmup_s=0,
                                    min_measure_s=0, on_profiled=refuse, screening_rounds=2, confirming_rounds=0)
    with pytest.raises(KeyError, match="no service"):
        fake_steps(plo, 20, step_s=0.005)
    assert plo.state == "decided"
    plo.restore()


def test_batch_size_optimizer_state_round_trips(simulated):
    bso = joule.BatchSizeOptimizer([16, 32, 64, 128], 32, beta=2.0, seed=3)
    costs = {16: 120.0, 32: 100.0, 64: 90.0, 128: 0.0}
    for _ in range(10):
        b = bso.predict()
        bso.observe(b, costs[b] if costs[b] else 300.0, costs[b] > 0)
    assert bso.phase == "thompson"
    again = joule.BatchSizeOptimizer.from_json(bso.to_json())
    assert json.loads(again.to_json()) == json.loads(bso.to_json())
    assert [again.predict() for _ in range(5)] == [bso.predict() for _ in range(5)]
    with pytest.raises(joule.UsageError, match="not valid JSON"):
        joule.BatchSizeOptimizer.from_json("{")


def test_type_stubs_cover_every_public_name():
    stubs = open(os.path.join(os.path.dirname(joule.__file__), "_joule.pyi")).read()
    for name in joule.__all__:
        if name in ("BatchSizeClient", "ServiceError", "Window"):  # pure Python: joule/service.py, joule/meter.py
            continue
        assert re.search(rf"^(class|def) {name}\b", stubs, re.M), name


# AMD GPUs through the fake ROCm SMI (built beside the fake NVML).
def fake_rocm_smi_library():
    explicit = os.environ.get("JOULE_TEST_FAKE_ROCM_SMI")
    if explicit:
        return explicit
    nvml = os.environ.get("JOULE_TEST_FAKE_NVML", "")
    beside = os.path.join(os.path.dirname(os.path.dirname(nvml)), "fake_rocm_smi", "librocm_smi64.so.1")
    if not nvml or not os.path.exists(beside):
        pytest.skip("the fake librocm_smi64.so.1 is not built here")
    return beside


@pytest.fixture
def amd_node(monkeypatch, tmp_path):
    """Two fake MI300X GPUs; NVML points nowhere unless a test sets it."""
    config = tmp_path / "fake_rocm_smi.conf"
    config.write_text('device name="AMD Instinct MI300X" max_limit_w=750 limit_w=700\n' * 2)
    monkeypatch.setenv("JOULE_ROCM_SMI_LIBRARY", fake_rocm_smi_library())
    monkeypatch.setenv("JOULE_FAKE_ROCM_SMI_CONFIG", str(config))
    monkeypatch.setenv("JOULE_FAKE_ROCM_SMI_LOG", str(tmp_path / "rocm_set_calls.log"))
    monkeypatch.setenv("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    monkeypatch.setenv("JOULE_DAEMON_SOCKET", "/nonexistent/jouled.sock")
    return tmp_path


def test_devices_lists_amd_gpus_with_their_backend_and_the_rocm_smi_fields(amd_node):
    for backend in ("auto", "rocm"):
        info = joule.devices(backend=backend)
        assert info["gpu_backend"] == "rocm"
        assert not info["simulated"]
        assert info["rocm_loaded"] and info["rocm_problem"] == ""
        assert info["rocm_library"] == os.environ["JOULE_ROCM_SMI_LIBRARY"]
        assert info["rocm_version"] == "5.2.3"
        assert info["rocm_missing_functions"] == []
        assert [g["backend"] for g in info["gpus"]] == ["rocm", "rocm"]
        assert [g["vendor_index"] for g in info["gpus"]] == [0, 1]
        assert info["gpus"][0]["name"] == "AMD Instinct MI300X"
        assert info["gpus"][0]["power_limit_w"] == 700.0
    assert not joule.devices()["nvml_loaded"]
    assert "/nonexistent/libnvidia-ml.so.1" in joule.devices()["nvml_problem"]
    with pytest.raises(joule.DeviceError, match="NVML"):
        joule.devices(backend="nvml")


def test_a_monitor_on_a_mixed_node_names_each_gpus_backend_and_both_libraries(amd_node, fake_a40s, monkeypatch):
    for name, value in fake_a40s(amd_node / "nvidia", gpus=1).items():
        monkeypatch.setenv(name, value)
    monitor = joule.Monitor(interval_ms=20)
    assert [(g["index"], g["backend"], g["vendor_index"]) for g in monitor.gpus] == [
        (0, "nvml", 0), (1, "rocm", 0), (2, "rocm", 1)]
    drivers = monitor.drivers
    assert drivers["gpu_backend"] == "nvml+rocm"
    assert drivers["nvml_loaded"] and drivers["rocm_loaded"]
    assert drivers["rocm_version"] == "5.2.3"
    with monitor.window("step") as w:
        time.sleep(0.05)
    assert len(w.measurement.gpu_energy_j) == 3


def test_cluster_visible_gpus_joins_each_vendors_variables(monkeypatch):
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    assert joule._joule.cluster_visible_gpus() is None
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    assert joule._joule.cluster_visible_gpus() == "nvidia:all,amd:3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert joule._joule.cluster_job_gpus([joule._joule.cluster_visible_gpus(), "amd:0"]) == ["0", "amd:3", "amd:0"]
