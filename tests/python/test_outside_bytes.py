# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Issue 47: text from a driver crossing into Python. A GPU name that is not
UTF-8 made joule.devices() and Monitor.gpus raise UnicodeDecodeError, and an
error quoting it was raised as UnicodeDecodeError rather than joule's own."""
import gc
import os

import pytest

import joule

# What a broken or hostile driver could answer for the name: bytes that are not UTF-8.
BAD_NAME = b"NVIDIA A40 \xff\xfe"
SHOWN_NAME = "NVIDIA A40 \\xFF\\xFE"  # as joule shows such bytes (printable)


@pytest.fixture
def badly_named_gpu(monkeypatch, tmp_path):
    config = tmp_path / "fake.conf"
    config.write_bytes(b'device name="' + BAD_NAME + b'" power_w=400 min_limit_w=200 max_limit_w=300\n')
    monkeypatch.setenv("JOULE_NVML_LIBRARY", os.environ["JOULE_TEST_FAKE_NVML"])
    monkeypatch.setenv("JOULE_FAKE_NVML_CONFIG", str(config))
    monkeypatch.setenv("JOULE_FAKE_NVML_LOG", str(tmp_path / "set_calls.log"))
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    yield
    # A Monitor left alive (here, held by the cycle between pytest.raises'
    # traceback and the test's frame) keeps NVML initialised, and the fake
    # reads its config only at the first nvmlInit after a shutdown: the next
    # test would see this one-GPU config. Collected now, the monitor shuts
    # NVML down before the environment goes back.
    gc.collect()


def test_a_gpu_name_that_is_not_utf8_is_shown_escaped(badly_named_gpu):
    info = joule.devices(backend="nvml")
    assert [gpu["name"] for gpu in info["gpus"]] == [SHOWN_NAME]
    monitor = joule.Monitor(backend="nvml", interval_ms=10)
    assert monitor.gpus[0]["name"] == SHOWN_NAME


def test_an_error_quoting_such_a_name_is_joules_error_with_valid_text(badly_named_gpu):
    monitor = joule.Monitor(backend="nvml", interval_ms=10)
    with pytest.raises(joule.UsageError) as raised:
        monitor.set_simulated_load(0.5)
    assert f"GPU 0 ({SHOWN_NAME}) is on backend 'nvml', not simulated" in str(raised.value)
