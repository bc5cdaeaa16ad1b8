# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The sample response kept per GPU model and driver (joule.sample_response,
joule.SampleResponseStore) on fake A40s: joule.attribute uses it once kept,
names its file, leaves it where a sample model is given, and falls back to
the boxcar with a warning for another driver's or a damaged file;
simulated GPUs keep and use none."""
import os
import time

import pytest

import joule
import joule.sample_response


def _window(monitor):
    recorder = joule.RegionRecorder(monitor)
    with monitor.window("steps") as w:
        for _ in range(40):
            with recorder.region("work"):
                time.sleep(0.008)
            time.sleep(0.004)
    return w.settled(timeout_s=5.0), recorder


def _used_kept(attributions, path):
    return all(any("measured response" in n and path in n for n in a.notes) for a in attributions)


def test_attribute_uses_the_response_kept_for_the_gpu_model_and_driver(fake_gpus):
    monitor = joule.Monitor(interval_ms=10)
    name, driver = joule.sample_response.gpu_model(monitor)
    assert name == "NVIDIA A40" and driver
    settled, recorder = _window(monitor)
    store = joule.SampleResponseStore()
    assert store.dir == os.environ["JOULE_SAMPLE_RESPONSE_DIR"]  # conftest: a directory of the test's own
    before = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0)
    assert not any("measured response" in n for a in before for n in a.notes)

    path = joule.sample_response.keep_sample_response(monitor, joule.SampleResponse([0.25, 0.5, 0.25], 1))
    assert path == store.path_for(name, driver) and os.path.isfile(path)
    kept = store.load(name, driver)
    assert kept.response_ms == [0.25, 0.5, 0.25] and path in kept.source
    used = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0)
    assert len(used) == 2 and _used_kept(used, path), used[0].notes
    # Not where asked not to, nor where a sample model is given.
    for options in ({"stored_response": False}, {"sample_cover_ms": 10.0},
                    {"sample_response": joule.SampleResponse([1.0], 0)}):
        assert not _used_kept(joule.attribute(monitor, settled, recorder, bootstrap_rounds=0, **options), path)

    # A driver update: the old driver's response is not used, and a warning says to measure again.
    os.rename(path, store.path_for(name, "1.0"))
    with pytest.warns(RuntimeWarning, match=f"kept for NVIDIA A40 with driver 1.0, not with this one \\({driver}\\)"):
        after_update = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0)
    assert not any("measured response" in n for a in after_update for n in a.notes)

    # A damaged file: refused with its path, the boxcar fitted.
    with open(store.path_for(name, driver), "wb") as f:
        f.write(b'{"format": "joule sample response 1", "gpu_name": "\xff')
    with pytest.warns(RuntimeWarning, match="not JSON") as warned:
        damaged = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0)
    assert store.path_for(name, driver) in str(warned[0].message)
    assert all(a.window_energy_j > 0 for a in damaged)


def test_simulated_gpus_keep_and_use_no_response():
    monitor = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)
    assert joule.sample_response.gpu_model(monitor) is None
    assert joule.sample_response.keep_sample_response(monitor, joule.SampleResponse([1.0], 0)) is None
    kept = os.environ["JOULE_SAMPLE_RESPONSE_DIR"]
    assert not os.path.exists(kept) or os.listdir(kept) == []
    settled, recorder = _window(monitor)
    [a] = joule.attribute(monitor, settled, recorder, bootstrap_rounds=0)
    assert not any("measured response" in n for n in a.notes)
