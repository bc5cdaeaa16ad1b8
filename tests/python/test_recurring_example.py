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


def run_example(*args, check=True):
    env = dict(os.environ, JOULE_NVML_LIBRARY="/nonexistent", JOULE_SIM="count=1,load=0.5")
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
