# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by the Python tests.

server: a real `joule serve` ($JOULE_TEST_BINARY, set by CTest, else bin/joule
next to the build tree's python/ directory that PYTHONPATH points at) on a
SQLite store in a temporary directory and a free loopback port.
"""
import os
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
