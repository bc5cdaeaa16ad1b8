# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by the Python tests.

server: a real `joule serve` ($JOULE_TEST_BINARY, set by CTest, else bin/joule
next to the build tree's python/ directory that PYTHONPATH points at) on a
SQLite store in a temporary directory and a free loopback port.

fake_driver_gpus: two fake A40-like GPUs on each fake driver library in turn
(the fake NVML, $JOULE_TEST_FAKE_NVML, and the fake ROCm SMI,
$JOULE_TEST_FAKE_ROCM_SMI), for the behaviour every driver must give
(tests/common/fake_drivers.h is the C++ tests' counterpart).
"""
import dataclasses
import os
import re
import signal
import subprocess
import time

import pytest

import joule


def joule_binary() -> str:
    explicit = os.environ.get("JOULE_TEST_BINARY")
    if explicit:
        return explicit
    # build/python/joule/__init__.py -> build/bin/joule
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(joule.__file__))))
    return os.path.join(build, "bin", "joule")


@pytest.fixture
def server(tmp_path):
    """A `joule serve` on a free port; yields its URL, stops it with SIGTERM."""
    yield from serve(tmp_path)


def serve(tmp_path, *extra):
    """Runs `joule serve ... extra`; yields its URL; stops it afterwards."""
    binary = joule_binary()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no joule binary at {binary} (set JOULE_TEST_BINARY)")
    port_file = tmp_path / "port"
    log = open(tmp_path / "serve.log", "w+")
    process = subprocess.Popen(
        [binary, "serve", "--store", f"sqlite:{tmp_path / 'jobs.db'}", "--listen", "127.0.0.1:0",
         "--port-file", str(port_file), "--quiet", *extra],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        port = 0
        deadline = time.monotonic() + 10.0
        while port == 0 and time.monotonic() < deadline and process.poll() is None:
            text = port_file.read_text() if port_file.exists() else ""
            if text.endswith("\n"):
                port = int(text)
            else:
                time.sleep(0.02)
        if port == 0:
            log.seek(0)
            pytest.fail(f"joule serve did not start: {log.read()}")
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


@pytest.fixture(autouse=True)
def _own_sample_response_store(monkeypatch, tmp_path):
    """Every test keeps sample responses in a directory of its own, never in
    the user's cache (joule.SampleResponseStore)."""
    monkeypatch.setenv("JOULE_SAMPLE_RESPONSE_DIR", str(tmp_path / "sample-responses"))


@pytest.fixture(autouse=True, scope="session")
def _own_torch_extensions(tmp_path_factory):
    """joule.torch's C++ comm hook is built once per test session, in a
    directory of the session's, never in the user's torch extension cache
    ($TORCH_EXTENSIONS_DIR, which the tests' child processes inherit)."""
    os.environ["TORCH_EXTENSIONS_DIR"] = str(tmp_path_factory.mktemp("torch-extensions"))


def fake_a40_environment(directory, gpus=2, extra=""):
    """Environment variables that make joule see `gpus` fake A40s (limits
    200-300 W) drawing 400 W, so every limit caps the power, through the fake
    libnvidia-ml.so.1 ($JOULE_TEST_FAKE_NVML); set-calls go to
    directory/set_calls.log; extra: more lines of the fake's config. A process
    with its own directory is a machine of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "fake.conf"
    config.write_text('device name="NVIDIA A40" power_w=400 min_limit_w=200 max_limit_w=300\n' * gpus + extra)
    return {
        "JOULE_NVML_LIBRARY": os.environ["JOULE_TEST_FAKE_NVML"],
        "JOULE_FAKE_NVML_CONFIG": str(config),
        "JOULE_FAKE_NVML_LOG": str(directory / "set_calls.log"),
        "JOULE_POWERCAP_ROOT": "/nonexistent",
    }


@pytest.fixture
def fake_a40s():
    """fake_a40_environment, for tests that start processes."""
    return fake_a40_environment


@pytest.fixture
def fake_gpus(monkeypatch, tmp_path):
    """Two fake A40s (limits 200-300 W) drawing 400 W in this process; returns
    the log of their set-calls."""
    for name, value in fake_a40_environment(tmp_path / "fake-gpus").items():
        monkeypatch.setenv(name, value)
    return tmp_path / "fake-gpus" / "set_calls.log"


@dataclasses.dataclass(frozen=True)
class FakeDriver:
    """A fake GPU library as a test parameter: where it is, its variables, the
    keys that make a device its driver's real GPU, and how its set-call log
    reads."""
    name: str  # the backend joule reports: "nvml" or "rocm"
    gpu_name: str  # what its GPUs are called
    library_env: str
    library_test_env: str  # the CTest variable naming the built fake
    config_env: str
    log_env: str
    device_keys: str  # put before each device line's own keys
    extra_lines: str  # appended to the config
    core_clocks_mhz: tuple  # the core clock levels, ascending
    limit_pattern: str  # a power-limit set call in the log; group 1: the limit
    limit_per_w: int  # the logged limit's units per watt

    def library(self):
        path = os.environ.get(self.library_test_env, "")
        if not path and self.name == "rocm":  # built beside the fake NVML
            nvml = os.environ.get("JOULE_TEST_FAKE_NVML", "")
            path = os.path.join(os.path.dirname(os.path.dirname(nvml)), "fake_rocm_smi", "librocm_smi64.so.1")
        if not os.path.exists(path):
            pytest.skip(f"the fake {self.name} library is not built here (${self.library_test_env})")
        return path

    def limits_set_w(self, log):
        """The power limits set, in watts, in order."""
        lines = log.read_text().splitlines() if log.exists() else []
        return [int(m.group(1)) // self.limit_per_w for m in map(re.compile(self.limit_pattern).search, lines) if m]

    def clock_lock_lines(self, device, cap_mhz):
        """The log lines of a core clock lock to [the lowest level, cap_mhz]."""
        if self.name == "nvml":
            return [f"nvmlDeviceSetGpuLockedClocks device={device} min_mhz={self.core_clocks_mhz[0]} max_mhz={cap_mhz}"]
        mask = sum(1 << i for i, mhz in enumerate(self.core_clocks_mhz) if mhz <= cap_mhz)
        return [f"rsmi_dev_perf_level_set device={device} level=manual",
                f"rsmi_dev_gpu_clk_freq_set device={device} clk=sys mask={mask:#x}"]

    def clock_reset_lines(self, device):
        if self.name == "nvml":
            return [f"nvmlDeviceResetGpuLockedClocks device={device}"]
        return [f"rsmi_dev_perf_level_set device={device} level=auto"]


FAKE_DRIVERS = (
    # The fake NVML's default clocks: 210-1000 MHz in 15 MHz steps.
    FakeDriver("nvml", "NVIDIA A40", "JOULE_NVML_LIBRARY", "JOULE_TEST_FAKE_NVML", "JOULE_FAKE_NVML_CONFIG",
               "JOULE_FAKE_NVML_LOG", "", "", tuple(range(210, 1001, 15)), r"limit_mw=(\d+)", 1000),
    # An MI300X as docs/devices.md describes it (15.3 uJ counter ticks every
    # 1 ms, current socket power, no average); clock levels holding the caps
    # the tests name (750 and 1000 MHz), not an MI300X's.
    FakeDriver("rocm", "AMD Instinct MI300X", "JOULE_ROCM_SMI_LIBRARY", "JOULE_TEST_FAKE_ROCM_SMI",
               "JOULE_FAKE_ROCM_SMI_CONFIG", "JOULE_FAKE_ROCM_SMI_LOG",
               "energy_resolution_uj=15.3 energy_update_ms=1 current_socket_power=1 edge_temp=0 "
               "sys_clocks_mhz=210,480,750,1000",
               "error function=rsmi_dev_power_ave_get code=2\n", (210, 480, 750, 1000), r"cap_uw=(\d+)", 1000000),
)


def fake_driver_environment(driver, directory, gpus=2, extra=""):
    """fake_a40_environment on `driver`: `gpus` GPUs (limits 200-300 W)
    drawing 400 W; the other driver's library points nowhere."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "fake.conf"
    device = (f'device name="{driver.gpu_name}" {driver.device_keys} '
              "power_w=400 min_limit_w=200 max_limit_w=300 limit_w=300\n")
    config.write_text(device * gpus + extra + driver.extra_lines)
    env = {d.library_env: "/nonexistent/" + d.name for d in FAKE_DRIVERS}
    env.update({
        driver.library_env: driver.library(),
        driver.config_env: str(config),
        driver.log_env: str(directory / "set_calls.log"),
        "JOULE_POWERCAP_ROOT": "/nonexistent",
        "JOULE_DAEMON_SOCKET": "/nonexistent/jouled.sock",
    })
    return env


@dataclasses.dataclass(frozen=True)
class FakeDriverGpus:
    driver: FakeDriver
    log: object  # the set-call log's path


@pytest.fixture(params=FAKE_DRIVERS, ids=lambda d: d.name)
def fake_driver_gpus(request, monkeypatch, tmp_path):
    """fake_gpus on each fake driver in turn."""
    for name, value in fake_driver_environment(request.param, tmp_path / "fake-gpus").items():
        monkeypatch.setenv(name, value)
    return FakeDriverGpus(request.param, tmp_path / "fake-gpus" / "set_calls.log")
