# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.torch.attribute on a DistributedDataParallel model (issue 32): a
real torch.distributed job (Gloo, CPU) of 2 processes on this machine, each
a rank running this file as a script with its own simulated GPU. The
gradient all-reduce is recorded as the concurrent region "allreduce" when
asked (allreduce=True), one call per bucket per step, the recording hook
leaves the gradients as DDP's own all-reduce does, and unasked no hook is
registered."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

STEPS = 60
# DDP's first bucket holds up to 1 MB, the others BUCKET_CAP_MB: the model's
# 1.6 MB of gradients make several.
BUCKET_CAP_MB = 0.25


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, limit_s=60.0):
    port = free_port()
    processes = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   JOULE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1", JOULE_POWERCAP_ROOT="/nonexistent")
        log = open(tmp_path / f"rank{rank}.log", "w")
        processes.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), str(tmp_path)], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    start = time.monotonic()
    for p in processes:
        try:
            p.wait(timeout=max(1.0, limit_s - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            pytest.fail(f"the job did not end within {limit_s} s: " + logs(tmp_path))
    assert [p.returncode for p in processes] == [0, 0], logs(tmp_path)
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]


def logs(tmp_path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("rank*.log")))


def test_ddp_allreduce_is_recorded_per_bucket_and_leaves_the_gradients_alone(tmp_path):
    start = time.monotonic()
    results = run_ranks(tmp_path)
    print(f"2 ranks in {time.monotonic() - start:.1f} s")
    for rank, r in enumerate(results):
        # Joule's default hook (DDP's allreduce_hook) and a hook of the user's
        # registered through joule: the gradients of every step as plain DDP's.
        assert r["same_gradients_default"] and r["same_gradients_own_hook"], rank
        buckets = r["buckets_per_step"]
        assert len(buckets) == STEPS and buckets[-1] > 1, buckets
        expected_calls = sum(buckets)
        for key in ("default", "own_hook"):
            a = r[key]
            assert "allreduce" in a["names"], a["names"]
            assert a["concurrent_regions"] == ["allreduce"]
            assert a["open_concurrent_calls"] == 0
            region = a["allreduce"]
            assert region["concurrent"] and region["calls"] == expected_calls, (key, region, buckets)
            # Sane times: each call spans a few to hundreds of microseconds, within the window.
            assert 0.0 < region["gpu_time_s"] < a["window_s"], region
            assert a["parts_j"] == pytest.approx(a["window_energy_j"], rel=1e-9)
            assert a["notes"] == []
        # A hook the user registered on DDP directly: noted, not replaced, not recorded.
        assert "allreduce" not in r["foreign"]["names"]
        assert any("already has a communication hook" in n for n in r["foreign"]["notes"]), r["foreign"]["notes"]
        assert r["foreign"]["same_gradients"]
        # Not asked for: no hook, no all-reduce region, the modules recorded as ever.
        assert not r["not_asked"]["joule_hook"] and "allreduce" not in r["not_asked"]["names"]
        assert any(n.endswith(".forward") for n in r["not_asked"]["names"]), r["not_asked"]["names"]
        assert r["not_asked"]["same_gradients"]


# -- one rank ---------------------------------------------------------------


def make_ddp():
    import torch

    torch.manual_seed(0)  # the same weights on every rank and in every run
    model = torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.Linear(512, 256), torch.nn.Linear(256, 10))
    return torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=BUCKET_CAP_MB)


def train(ddp, batches, session=None, on_step=None):
    """STEPS steps of SGD; returns every step's gradients, flattened."""
    import torch

    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    if session is not None:
        session.optimizer = opt
        session._wrap_step()
    grads = []
    for step, (x, y) in enumerate(batches):
        if on_step is not None:
            on_step(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        grads.append(torch.cat([p.grad.flatten() for p in ddp.parameters()]).clone())
        opt.step()
        time.sleep(0.001)  # a step the 10 ms samples see in several phases
    return grads


def attributed(ddp, batches, monitor, on_step=None):
    import joule.torch

    with joule.torch.attribute(ddp, monitor, clock="host", allreduce=True) as session:
        with monitor.window("train") as w:
            grads = train(ddp, batches, session, on_step)
    [a] = session.result(monitor.settle(w.measurement, timeout_s=5.0), bootstrap_rounds=0)
    regions = {r.name: r.to_dict() for r in a.regions}
    summary = {"names": session.recorder.names, "concurrent_regions": session.recorder.concurrent_regions,
               "open_concurrent_calls": session.recorder.open_concurrent_calls, "allreduce": regions.get("allreduce"),
               "window_s": w.measurement.elapsed_s, "window_energy_j": a.window_energy_j,
               "parts_j": a.idle_energy_j + sum(r.energy_j for r in a.regions),
               "notes": session.notes}
    return grads, summary


def same(a, b) -> bool:
    import torch

    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def rank_main(out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    import joule
    import joule.torch

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    batches = [(torch.randn(16, 32, generator=generator), torch.randint(0, 10, (16,), generator=generator))
               for _ in range(STEPS)]
    monitor = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)

    plain = train(make_ddp(), batches)
    grads, default = attributed(make_ddp(), batches, monitor)
    result = {"same_gradients_default": same(plain, grads), "default": default}

    # The user's own hook (counting buckets, then DDP's all-reduce), registered through joule.
    step_of = [0]
    seen = [set() for _ in range(STEPS)]

    def counting_hook(state, bucket):
        seen[step_of[0]].add(bucket.index())
        return default_hooks.allreduce_hook(state, bucket)

    own = make_ddp()
    joule.torch.register_comm_hook(own, own.process_group, counting_hook)
    grads, result["own_hook"] = attributed(own, batches, monitor, on_step=lambda s: step_of.__setitem__(0, s))
    result["same_gradients_own_hook"] = same(plain, grads)
    result["buckets_per_step"] = [len(s) for s in seen]

    # A hook registered on DDP directly: joule cannot add its own.
    foreign = make_ddp()
    foreign.register_comm_hook(foreign.process_group, default_hooks.allreduce_hook)
    grads, result["foreign"] = attributed(foreign, batches, monitor)
    result["foreign"]["same_gradients"] = same(plain, grads)

    # Without allreduce=True: DDP keeps its built-in all-reduce (no comm hook
    # of joule's, which would cost every later step) and no all-reduce is recorded.
    untouched = make_ddp()
    with joule.torch.attribute(untouched, monitor, clock="host") as session:
        grads = train(untouched, batches, session)
    result["not_asked"] = {"joule_hook": getattr(untouched, "_joule_comm", None) is not None,
                           "names": session.recorder.names, "same_gradients": same(plain, grads)}

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    rank_main(sys.argv[1])
