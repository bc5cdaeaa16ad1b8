# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.hf.EnergyCallback in a 2-rank torch.distributed job (Gloo, CPU, one
node) on the transformers stand-in, each GPU counted once: by local rank 0
for the node (CUDA_VISIBLE_DEVICES unset or listing every GPU), or by each
rank for its own GPU (CUDA_VISIBLE_DEVICES per rank). Also
joule.meter.process_layout's rules."""
import json
import os
import subprocess
import sys
import time

import pytest

import joule.meter
from test_distributed import free_port

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frameworks_rank.py")


def run_ranks(tmp_path, per_rank_env):
    port = free_port()
    processes = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", JOULE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1",
                   JOULE_SIM="count=2,load=1", JOULE_POWERCAP_ROOT="/nonexistent")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.update(per_rank_env(rank))
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        log = open(tmp_path / f"rank{rank}.log", "w")
        processes.append(subprocess.Popen([sys.executable, HELPER, str(tmp_path)], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))
    start = time.monotonic()
    for p in processes:
        try:
            code = p.wait(timeout=max(1.0, 90 - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            pytest.fail("the job did not end: " + "".join((tmp_path / f"rank{r}.log").read_text() for r in range(2)))
        assert code == 0, "".join((tmp_path / f"rank{r}.log").read_text() for r in range(2))
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def check_job(results, tmp_path):
    summary = results[0]["summary"]
    # Both ranks reduced to the same summary; rank 0 wrote it.
    assert results[1]["summary"]["energy_j"] == pytest.approx(summary["energy_j"])
    on_disk = json.loads((tmp_path / "out" / "joule_energy.json").read_text())
    assert on_disk["energy_j"] == pytest.approx(summary["energy_j"])
    # Each of the two simulated GPUs once.
    assert len(summary["gpus"]) == 2
    measured = sorted(g for r in results for g in r["gpus"])
    assert measured == [0, 1]
    assert summary["energy_j"] == pytest.approx(summary["train_window_energy_j"], rel=0.01)
    # The job's samples and tokens (12 steps of 4 x 2 accumulated on each of 2 ranks; 512 tokens a step).
    assert summary["samples"] == pytest.approx(12 * 4 * 2 * 2)
    assert summary["tokens"] == pytest.approx(12 * 512)
    phases = summary["phases"]
    train_j = summary["energy_j"] - phases["eval"]["energy_j"] - phases["save"]["energy_j"]
    assert summary["energy_per_sample_j"] == pytest.approx(train_j / (12 * 16))
    return summary


def test_standin_two_ranks_local_rank_zero_measures_the_node(tmp_path):
    results = run_ranks(tmp_path, lambda rank: {})
    assert [r["measuring"] for r in results] == [True, False]
    assert [r["layout"] for r in results] == ["node", "node"]
    summary = check_job(results, tmp_path)
    assert summary["layout"]["measuring_ranks"] == [0]
    # Rank 0's logs carry the node's energy; rank 1 logs nothing of its own.
    assert results[0]["logged"] and not results[1]["logged"]


def test_standin_two_ranks_each_measures_its_own_gpu(tmp_path):
    results = run_ranks(tmp_path, lambda rank: {"CUDA_VISIBLE_DEVICES": str(rank)})
    assert [r["measuring"] for r in results] == [True, True]
    assert [r["layout"] for r in results] == ["rank", "rank"]
    summary = check_job(results, tmp_path)
    assert summary["layout"]["measuring_ranks"] == [0, 1]


def test_process_layout_rules():
    single = joule.meter.process_layout({})
    assert single.mode == "single" and single.gpus is None and single.measuring
    node0 = joule.meter.process_layout({"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
                                        "CUDA_VISIBLE_DEVICES": "2,3,4,5"})
    assert node0.mode == "node" and node0.gpus == ["2", "3", "4", "5"] and node0.ranks_covered == 4
    node1 = joule.meter.process_layout({"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    assert node1.mode == "node" and not node1.measuring and node1.gpus == []
    unset = joule.meter.process_layout({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"})
    assert unset.gpus == ["0", "1"]
    own = joule.meter.process_layout({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                                      "CUDA_VISIBLE_DEVICES": "GPU-abc"})
    assert own.mode == "rank" and own.gpus == ["GPU-abc"] and own.ranks_covered == 1
