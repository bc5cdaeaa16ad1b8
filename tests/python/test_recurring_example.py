# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""examples/recurring/train.py on the CPU with a few hundred Fashion-MNIST
images (Debian's dataset-fashion-mnist): a run to its target, recurrences
through a real `joule serve`, and the data's errors named."""
import gzip
import json
import os
import struct
import subprocess
import sys

import pytest

import joule

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "recurring", "train.py")
DATA_DIR = "/usr/share/datasets/fashion-mnist"
pytest.importorskip("torch")
if not os.path.isdir(DATA_DIR):
    pytest.fail(f"{DATA_DIR} is missing: install dataset-fashion-mnist (scripts/install-deps.sh)", pytrace=False)


def run_example(*args, check=True, env=None):
    env = env or dict(os.environ, JOULE_NVML_LIBRARY="/nonexistent", JOULE_SIM="count=1,load=0.5")
    done = subprocess.run([sys.executable, EXAMPLE, "--device", "cpu", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])
    return done


def test_a_run_trains_to_its_target_and_reports_each_epoch(tmp_path):
    result_path = tmp_path / "result.json"
    result = run_example("--subset", "500", "--target", "0.55", "--max-epochs", "4", "--batch-size", "32",
                         "--result-json", str(result_path))
    assert result == json.loads(result_path.read_text())
    assert result["batch_size"] == 32 and result["train_images"] == 500 and result["test_images"] == 100
    assert result["reached"] and result["accuracy_per_epoch"][-1] >= 0.55
    assert all(a < 0.55 for a in result["accuracy_per_epoch"][:-1])  # it stops at the first epoch that reaches it
    assert result["epochs"] == len(result["accuracy_per_epoch"]) == len(result["epoch_energy_j"])
    # The run's window holds every epoch's.
    assert result["energy_j"] >= sum(result["epoch_energy_j"]) > 0
    assert result["average_power_w"] == pytest.approx(result["energy_j"] / result["time_s"])


def test_an_unreachable_target_ends_at_max_epochs():
    result = run_example("--subset", "200", "--target", "0.999", "--max-epochs", "2", "--batch-size", "64")
    assert not result["reached"] and result["epochs"] == 2


def test_recurrences_take_their_batch_size_from_the_service_and_report_to_it(server):
    client = joule.BatchSizeClient(server)
    results = [run_example("--service", server, "--job", "fmnist", "--subset", "300", "--target", "0.5",
                           "--max-epochs", "2", "--batch-sizes", "32,64", "--seed", str(seed)) for seed in (1, 2, 3)]
    assert all(r["batch_size"] in (32, 64) and r["cost"] > 0 and r["job"] == "fmnist" for r in results)
    job = client.job("fmnist")
    assert job["spec"]["batch_sizes"] == [32, 64] and job["spec"]["default_batch_size"] == 64
    assert job["recurrences"] == 3 and not job["in_flight"]
    # What the service learned is each run's own settled window, the energy and time the run reports.
    learned = client.export_job("fmnist")["recurrences"]
    for result, recurrence in zip(results, learned):
        assert result["window"]["settled"]
        assert recurrence["energy_j"] == pytest.approx(result["energy_j"])
        assert recurrence["time_s"] == pytest.approx(result["window"]["elapsed_s"])


def test_the_observer_profile_visits_every_limit_and_sets_none(tmp_path):
    """--power-limit observe on a fake H200 whose driver logs every set call:
    each candidate limit is visited and measured, and nothing is set."""
    set_log = tmp_path / "sets.log"
    config = tmp_path / "nvml.conf"
    config.write_text(f"set_log {set_log}\n"
                      'device name="NVIDIA H200" power_w=250 limit_w=700 min_limit_w=200 max_limit_w=700 '
                      "default_limit_w=700\n")
    env = dict(os.environ, JOULE_NVML_LIBRARY=os.environ["JOULE_TEST_FAKE_NVML"], JOULE_FAKE_NVML_CONFIG=str(config))
    result = run_example("--subset", "1000", "--target", "0.999", "--max-epochs", "3", "--batch-size", "8",
                         "--power-limit", "observe", env=env)
    profile = result["profile"]
    assert profile["observer"] and profile["state"] == "decided"
    assert profile["candidate_limits_w"] == [700.0, 600.0, 500.0, 400.0, 300.0, 200.0]
    assert [row["power_limit_w"] for row in profile["rows"]] == profile["candidate_limits_w"]
    # Every visit measured the fake's 250 W (the one limit in force), over its steps.
    assert all(row["steps"] >= 5 and row["avg_power_w"] == pytest.approx(250, rel=0.05) for row in profile["rows"])
    assert not set_log.exists() or set_log.read_text() == ""


def test_damaged_or_missing_data_is_named(tmp_path):
    done = run_example("--data-dir", str(tmp_path), check=False)
    assert done.returncode != 0 and "dataset-fashion-mnist" in done.stderr and "train-images" in done.stderr
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                 "t10k-labels-idx1-ubyte.gz"):
        (tmp_path / name).write_bytes(open(os.path.join(DATA_DIR, name), "rb").read())
    # A header that promises more images than the file holds.
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">HBBIII", 0, 8, 3, 60000, 28, 28) + bytes(784 * 10))
    done = run_example("--data-dir", str(tmp_path), check=False)
    assert done.returncode != 0 and "train-images-idx3-ubyte.gz" in done.stderr and "says" in done.stderr
