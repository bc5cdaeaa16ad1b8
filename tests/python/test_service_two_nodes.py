# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Two training processes, each posing as a machine of its own (its own fake
GPUs), run examples/service/recurring_training.py at the same time against
one `joule serve` (the server fixture in conftest.py) and share one bandit
and the power profiles their optimizers measure.
"""
import json
import os
import subprocess
import sys

import joule

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "service",
                       "recurring_training.py")
JOB = "toy-regression"
RECURRENCES = 4  # per node, over 3 batch sizes: each node repeats one
TIMEOUT_S = 240


def start_node(server, name, environment, log_dir):
    env = dict(os.environ)
    env.update(environment)
    env.pop("JOULE_SERVICE_URL", None)
    stderr = open(log_dir / f"{name}.stderr", "w")
    process = subprocess.Popen(
        [sys.executable, EXAMPLE, "--url", server, "--job", JOB, "--node", name,
         "--recurrences", str(RECURRENCES), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    return process, stderr


def wait_for(process, stderr, name):
    try:
        out, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    stderr.close()
    with open(stderr.name) as f:
        assert process.returncode == 0, f"{name} exited with {process.returncode}:\n{f.read()}"
    return [json.loads(line) for line in out.splitlines()]


def test_two_nodes_share_one_bandit_and_their_power_profiles(server, fake_a40s, tmp_path):
    # Same GPUs on both (the job's spec names the model and the count).
    nodes = {name: fake_a40s(tmp_path / name, gpus=2) for name in ("node-a", "node-b")}
    started = {name: start_node(server, name, env, tmp_path) for name, env in nodes.items()}
    runs = {name: wait_for(process, stderr, name) for name, (process, stderr) in started.items()}

    client = joule.BatchSizeClient(server, timeout_s=10.0)
    exported = client.export_job(JOB)
    summary = client.job(JOB)
    rows = {r["id"]: r for r in exported["recurrences"]}
    reported = RECURRENCES * len(nodes)

    # Both nodes' recurrences landed in the one job, each as its node said.
    assert {r["node"] for r in rows.values()} == set(nodes)
    for name, results in runs.items():
        assert len(results) == RECURRENCES
        for result in results:
            row = rows[result["recurrence_id"]]
            assert row["node"] == name and row["batch_size"] == result["batch_size"]
            assert row["power_limit_w"] == result["advised_limit_w"]
            assert row["cost"] == result["cost"] and row["reached_target"] == result["reached_target"]
    assert len(rows) == reported and summary["recurrences"] == reported and summary["in_flight"] == 0

    # Every ask and every report changed the job (no update lost), and the
    # optimizer's state holds every run that reached the target.
    assert summary["revision"] == 1 + 2 * reported
    observed = sum(sums["n"] for sums in exported["state"]["running_sums"].values())
    reached = sum(r["reached_target"] for r in rows.values())
    assert reached <= observed <= reported

    # Every run without advice profiled and published what it measured; every
    # run asked after such a run (or after a run with advice) of its batch
    # size reported started at the advised limit, unprofiled. "After": on the
    # same node (one run after the other), or in a later second of the
    # service's clock.
    results = {r["recurrence_id"]: r for results in runs.values() for r in results}
    for r in results.values():
        if r["advised_limit_w"] is None:
            assert r["limits_profiled"] == 3 and r["profile_published"] is True, r

    def asked_after(earlier, later):
        if earlier["node"] == later["node"]:
            return earlier["recurrence_id"] < later["recurrence_id"]
        return rows[earlier["recurrence_id"]]["finished_at"] < rows[later["recurrence_id"]]["started_at"]

    skipped = 0
    for r in results.values():
        if any(q["batch_size"] == r["batch_size"] and asked_after(q, r) for q in results.values()):
            assert r["advised_limit_w"] is not None, r
            assert r["from_service"] and r["limits_profiled"] == 0 and r["profile_published"] is None, r
            assert r["chosen_limit_w"] == r["advised_limit_w"], r
            skipped += 1
    assert skipped > 0, "no run came after a profiled run of its batch size"

    # Each machine's GPUs got their original limit back.
    for name in nodes:
        log = tmp_path / name / "set_calls.log"
        assert log.exists(), f"{name} never set a limit"
        assert log.read_text().splitlines()[-1].endswith("limit_mw=300000")
