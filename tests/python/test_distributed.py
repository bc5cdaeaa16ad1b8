# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.distributed: real torch.distributed jobs (Gloo, CPU) of 4 processes
on this machine, JOULE_RANKS_PER_NODE=2 making them 2 nodes of 2 ranks:
node-0 (ranks 0, 1) with 2 simulated GPUs, node-1 (ranks 2, 3) with 1. Each
rank runs tests/python/distributed_job.py and writes what it got."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest
import torch.distributed

import joule
import joule.distributed
from conftest import fake_driver_environment

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_job.py")
SIM_W = 650.0  # a simulated GPU at load=1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def joule_environment(sim: str) -> dict:
    return {"JOULE_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
            "JOULE_ROCM_SMI_LIBRARY": "/nonexistent/librocm_smi64.so.1", "JOULE_SIM": sim,
            "JOULE_POWERCAP_ROOT": "/nonexistent", "JOULE_NODE_NAME": "node", "JOULE_RANKS_PER_NODE": "2"}


def run_job(tmp_path, scenario, node_env=None, limit_s=60.0):
    """Starts the 4 ranks; returns ({rank: result}, {rank: exit status}, seconds).
    node_env: per node index, environment that replaces the simulated GPUs."""
    port = free_port()
    processes = []
    for rank in range(4):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="4",
                   LOCAL_RANK=str(rank % 2), LOCAL_WORLD_SIZE="2",
                   **joule_environment("count=2,load=1" if rank < 2 else "count=1,load=1"))
        env.update((node_env or {}).get(rank // 2, {}))
        log = open(tmp_path / f"rank{rank}.log", "w")
        processes.append(subprocess.Popen([sys.executable, HELPER, scenario, str(tmp_path)], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    start = time.monotonic()
    codes = {}
    for rank, p in enumerate(processes):
        try:
            codes[rank] = p.wait(timeout=max(1.0, limit_s - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            pytest.fail(f"the job did not end within {limit_s} s: " + logs(tmp_path))
    seconds = time.monotonic() - start
    results = {}
    for rank in range(4):
        path = tmp_path / f"rank{rank}.json"
        if path.exists():
            results[rank] = json.loads(path.read_text())
    return results, codes, seconds


def logs(tmp_path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("rank*.log")))


def assert_node_measured(node, name, ranks, gpus, elapsed_s=None):
    """One node's report: its ranks, its GPUs once each at the simulated power."""
    assert node["node"] == name and node["ranks"] == ranks
    assert [d["kind"] for d in node["devices"]] == ["gpu"] * gpus
    for d in node["devices"]:
        assert d["energy_j"] == pytest.approx(SIM_W * node["elapsed_s"], rel=0.02)
    assert node["total_energy_j"] == pytest.approx(sum(d["energy_j"] for d in node["devices"]))
    if elapsed_s is not None:  # a rank woken before the leader at the begin edge may end it a hair early
        assert elapsed_s - 0.01 <= node["elapsed_s"] < elapsed_s + 0.3


def test_needs_an_initialised_process_group():
    assert not torch.distributed.is_initialized()
    with pytest.raises(joule.UsageError, match="init_process_group"):
        joule.distributed.DistributedMonitor()


def test_two_nodes_each_measured_once(tmp_path):
    results, codes, seconds = run_job(tmp_path, "normal")
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, logs(tmp_path)
    assert {r: (x["node"], x["leader"], x["measures"]) for r, x in results.items()} == {
        0: ("node-0", True, True), 1: ("node-0", False, False),
        2: ("node-1", True, True), 3: ("node-1", False, False)}
    assert results[3]["nodes"] == {"node-0": [0, 1], "node-1": [2, 3]}
    for window, elapsed_s in (("w1", 0.5), ("w2", 0.3)):
        report = results[0]["reports"][window]["json"]
        assert report["window"] == window and report["world_size"] == 4
        assert report["missing_nodes"] == [] and report["lost_ranks"] == []
        node0, node1 = report["nodes"]
        assert_node_measured(node0, "node-0", [0, 1], 2, elapsed_s)
        assert_node_measured(node1, "node-1", [2, 3], 1, elapsed_s)
        # The same span on both nodes: their edges within a few ms.
        assert abs(node0["elapsed_s"] - node1["elapsed_s"]) < 0.02
        assert report["edge_skew_s"] < 0.05
        assert report["total_energy_j"] == pytest.approx(node0["total_energy_j"] + node1["total_energy_j"])
        assert report["gpu_energy_j"] == pytest.approx(report["total_energy_j"])  # no RAPL here
        text = results[0]["reports"][window]["text"]
        assert "on 2 nodes, 4 ranks" in text and "node node-1 (ranks 2,3)" in text and "PARTIAL" not in text
        # broadcast=True: every rank got rank 0's report.
        for rank in (1, 2, 3):
            assert results[rank]["reports"][window] == results[0]["reports"][window]
    for x in results.values():
        # No warning but the one that the leaders, which open the devices,
        # give for simulated GPUs in place of the missing driver.
        expected = ["GPUs are SIMULATED"] if x["leader"] else []
        assert x["seconds"]["end w1"] < 2.0
        assert [w for w in expected if not any(w in given for given in x["warnings"])] == [], x["warnings"]
        assert len(x["warnings"]) == len(expected), x["warnings"]
    print(f"normal job: {seconds:.1f} s; rank 0's end_window {1e3 * results[0]['seconds']['end w1']:.1f} ms")


def test_a_hung_leader_costs_one_timeout_and_its_node_is_named(tmp_path):
    """Rank 2 (node-1's leader) sleeps 5 s past the end edge; timeout_s=3."""
    results, codes, seconds = run_job(tmp_path, "hang")
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, logs(tmp_path)
    for rank in (0, 1, 3):  # released 3 s after they arrived
        assert 3.0 <= results[rank]["seconds"]["end w1"] < 4.5
    w1 = results[0]["reports"]["w1"]["json"]
    [node0] = w1["nodes"]
    assert_node_measured(node0, "node-0", [0, 1], 2)
    assert 3.49 <= node0["elapsed_s"] < 4.2  # 0.5 s, then 3 s waiting for rank 2
    assert w1["missing_nodes"] == ["node-1 (rank 2): did not reach the end of window 'w1' within 3 s; "
                                   "not waited for since"]
    assert w1["total_energy_j"] == pytest.approx(node0["total_energy_j"])
    assert "PARTIAL" in results[0]["reports"]["w1"]["text"]
    # The next window does not wait for the lost node again.
    w2 = results[0]["reports"]["w2"]["json"]
    assert [n["node"] for n in w2["nodes"]] == ["node-0"] and len(w2["missing_nodes"]) == 1
    assert results[0]["seconds"]["w2"] < 1.5
    # The late rank is told, returns at once, and takes no further part.
    late = results[2]
    assert late["seconds"]["end w1"] < 1.0 and late["reports"] == {"w1": None, "w2": None}
    assert any("after the other ranks had gone on without it" in w for w in late["warnings"])
    print(f"hung leader: job {seconds:.1f} s, rank 0's end_window {results[0]['seconds']['end w1']:.2f} s")


def test_a_leader_whose_measurement_fails_is_reported_with_why(tmp_path):
    results, codes, _ = run_job(tmp_path, "fail")
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, logs(tmp_path)
    report = results[0]["reports"]["w1"]["json"]
    [node0] = report["nodes"]
    assert_node_measured(node0, "node-0", [0, 1], 2, 0.5)
    assert report["missing_nodes"] == ["node-1 (rank 2): its measurement failed: gpu0: GPU is lost "
                                       "(injected by the test)"]
    assert results[0]["seconds"]["end w1"] < 2.0  # its error arrived: no timeout
    assert any("GPU is lost" in w for w in results[2]["warnings"])


def test_a_node_that_dies_is_named_and_the_others_kept(tmp_path):
    results, codes, seconds = run_job(tmp_path, "die")
    assert codes[2] == 3 and codes[0] == codes[1] == codes[3] == 0, logs(tmp_path)
    assert 3.0 <= results[0]["seconds"]["end w1"] < 4.5
    report = results[0]["reports"]["w1"]["json"]
    assert [n["node"] for n in report["nodes"]] == ["node-0"]
    assert_node_measured(report["nodes"][0], "node-0", [0, 1], 2)
    assert report["missing_nodes"] == ["node-1 (rank 2): did not reach the end of window 'w1' within 3 s; "
                                       "not waited for since"]
    assert [x["rank"] for x in report["lost_ranks"]] == [2]


# What each fake driver returns for a GPU that is gone (tests/common/fake_drivers.cc: @lost),
# and the variable that gives a rank its GPUs, numbered among its vendor's.
LOST_CODE = {"nvml": 15, "rocm": 10}  # NVML_ERROR_GPU_IS_LOST, RSMI_STATUS_NOT_FOUND
VISIBLE_VARIABLE = {"nvml": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES"}


def test_a_gpu_lost_inside_the_window_is_reported_on_its_node(tmp_path, fake_driver_gpus):
    """node-1 has two fake GPUs at 400 W on each fake driver in turn; its
    ranks may use GPU 1 (their vendor's variable names it: CUDA_VISIBLE_DEVICES
    or HIP_VISIBLE_DEVICES), which fails 250 ms after the driver opens."""
    driver = fake_driver_gpus.driver
    fake = fake_driver_environment(driver, tmp_path / "node-1", gpus=2,
                                   extra=f"error function=* device=1 code={LOST_CODE[driver.name]} after_ms=250\n")
    fake[VISIBLE_VARIABLE[driver.name]] = "1"
    results, codes, _ = run_job(tmp_path, "one", node_env={1: fake})
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, logs(tmp_path)
    report = results[0]["reports"]["w1"]["json"]
    node0, node1 = report["nodes"]
    assert_node_measured(node0, "node-0", [0, 1], 2, 0.5)
    assert node1["node"] == "node-1" and len(node1["devices"]) == 1
    assert node1["devices"][0]["name"].startswith("gpu1 ")
    # "... energy after t=0.25 s is missing (gpu1: <the call> failed: GPU is lost)", or on ROCm SMI
    # "(... RSMI_STATUS_NOT_FOUND ...; it answered before, so the GPU is taken as lost)".
    assert any("energy after t=" in w and "is missing" in w and "lost" in w for w in node1["warnings"]), \
        node1["warnings"]
    assert 0 < node1["devices"][0]["energy_j"] < 400.0 * node1["elapsed_s"]  # stops where the GPU was lost


def test_under_torchrun(tmp_path):
    """The same job started by torchrun (its own store and environment): 4
    ranks on one machine, 2 nodes of one simulated GPU each. (--redirects
    and --tee name a stream: the default "0" fails under Python 3.11 with
    Debian's torch 1.13, whose Std.from_str finds no member for 0.)"""
    env = dict(os.environ, **joule_environment("count=1,load=1"))
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
         "--monitor_interval", "0.2", "--redirects", "2", "--tee", "2", "--log_dir", str(tmp_path / "torchrun"), HELPER, "normal", str(tmp_path)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert process.returncode == 0, process.stdout
    results = {r: json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)}
    report = results[0]["reports"]["w1"]["json"]
    node0, node1 = report["nodes"]
    assert_node_measured(node0, "node-0", [0, 1], 1, 0.5)
    assert_node_measured(node1, "node-1", [2, 3], 1, 0.5)
    assert results[3]["reports"]["w1"] == results[0]["reports"]["w1"]
    print(f"torchrun job: {time.monotonic() - started:.1f} s")


def test_each_node_measures_the_gpus_its_ranks_may_use(tmp_path):
    """As joule measure --mpi: node-0's ranks may use GPU 1 of its 2, so its
    leader measures that one; node-1's ranks name a GPU it lacks, so node-1
    is missing with why (and rank 0 does not wait for it)."""
    results, codes, _ = run_job(tmp_path, "one", node_env={0: {"CUDA_VISIBLE_DEVICES": "1"},
                                                           1: {"CUDA_VISIBLE_DEVICES": "5"}})
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, logs(tmp_path)
    report = results[0]["reports"]["w1"]["json"]
    [node0] = report["nodes"]
    assert_node_measured(node0, "node-0", [0, 1], 1, 0.5)
    assert node0["devices"][0]["name"].startswith("gpu1 ")
    [missing] = report["missing_nodes"]
    assert missing.startswith("node-1 (rank 2): its devices could not be opened: CUDA_VISIBLE_DEVICES names '5'")
    assert results[0]["seconds"]["end w1"] < 2.0
