# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.torch.attribute on a DistributedDataParallel model (issue 32): a
real torch.distributed job (Gloo, CPU) of 2 processes on this machine, each
a rank running this file as a script with its own simulated GPU. The
gradient all-reduce is recorded as the concurrent region "allreduce", one
call per bucket per step, by joule's C++ comm hook (built against this
PyTorch by the first rank to ask) or a Python hook of the user's, leaving
the gradients as DDP's own all-reduce does; with allreduce=False no hook is
registered. Where the C++ hook cannot be built (no ninja), the all-reduce is
not recorded by default, and allreduce=True records it through Python with a
warning."""
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


# The first run builds the C++ hook (~40 s on 2 idle cores; CI's are busy).
def run_ranks(tmp_path, ranks=2, mode="ranks", path=None, limit_s=300.0):
    port = free_port()
    processes = []
    for rank in range(ranks):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(ranks),
                   JOULE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1", JOULE_POWERCAP_ROOT="/nonexistent")
        if path is not None:
            env["PATH"] = path
        log = open(tmp_path / f"rank{rank}.log", "w")
        processes.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), str(tmp_path), mode], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    start = time.monotonic()
    for p in processes:
        try:
            p.wait(timeout=max(1.0, limit_s - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            pytest.fail(f"the job did not end within {limit_s} s: " + logs(tmp_path))
    assert [p.returncode for p in processes] == [0] * ranks, logs(tmp_path)
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(ranks)]


def logs(tmp_path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("rank*.log")))


def test_ddp_allreduce_is_recorded_per_bucket_and_leaves_the_gradients_alone(tmp_path):
    start = time.monotonic()
    results = run_ranks(tmp_path)
    print(f"2 ranks in {time.monotonic() - start:.1f} s")
    for rank, r in enumerate(results):
        # By default joule's C++ hook records DDP's own all-reduce; a hook of
        # the user's registered through joule records through Python. The
        # gradients of every step as plain DDP's, in sessions and outside.
        assert r["native_hook"], r
        assert r["same_gradients_default"] and r["same_gradients_own_hook"], rank
        assert r["same_gradients_outside"] and r["same_gradients_again"], rank
        buckets = r["buckets_per_step"]
        assert len(buckets) == STEPS and buckets[-1] > 1, buckets
        # DDP hands the first step's gradients over in one bucket, then rebuilds its buckets.
        expected_calls = {"default": sum(buckets), "own_hook": sum(buckets), "again": STEPS * buckets[-1]}
        for key in ("default", "again", "own_hook"):
            a = r[key]
            assert "allreduce" in a["names"], a["names"]
            assert a["concurrent_regions"] == ["allreduce"]
            assert a["open_concurrent_calls"] == 0
            region = a["allreduce"]
            assert region["concurrent"] and region["calls"] == expected_calls[key], (key, region, buckets)
            # Sane times: each call spans a few to hundreds of microseconds, within the window.
            assert 0.0 < region["gpu_time_s"] < a["window_s"], region
            assert a["parts_j"] == pytest.approx(a["window_energy_j"], rel=1e-9)
            assert a["notes"] == []
        # A hook the user registered on DDP directly: noted, not replaced, not recorded.
        assert "allreduce" not in r["foreign"]["names"]
        assert any("already has a communication hook" in n for n in r["foreign"]["notes"]), r["foreign"]["notes"]
        assert r["foreign"]["same_gradients"]
        # allreduce=False: no hook, no all-reduce region, the modules recorded as ever.
        assert not r["not_asked"]["joule_hook"] and "allreduce" not in r["not_asked"]["names"]
        assert any(n.endswith(".forward") for n in r["not_asked"]["names"]), r["not_asked"]["names"]
        assert r["not_asked"]["same_gradients"]


def test_without_ninja_the_allreduce_is_recorded_only_when_asked_and_then_through_python(tmp_path):
    # The interpreter by its full path, and a PATH without ninja: the C++ hook cannot be built.
    [r] = run_ranks(tmp_path, ranks=1, mode="no-ninja", path="/nonexistent")
    default = r["default"]
    assert not default["joule_hook"] and "allreduce" not in default["names"], default
    assert any(n.startswith("allreduce: not recorded") and "ninja is not on PATH" in n and "allreduce=True" in n
               for n in default["notes"]), default["notes"]
    asked = r["asked"]
    assert asked["joule_hook"] and not asked["native"], asked
    assert any("cannot be built here" in w and "Python comm hook" in w for w in asked["warnings"]), asked["warnings"]
    # Every bucket of every step: one in the first, as many as later in each other.
    calls = asked["allreduce"]["calls"]
    assert (calls - 1) % (STEPS - 1) == 0 and calls > STEPS, asked
    assert asked["same_gradients"]


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


def attributed(ddp, batches, monitor, on_step=None, allreduce=None):
    import joule.torch

    with joule.torch.attribute(ddp, monitor, clock="host", allreduce=allreduce) as session:
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


def rank_main(out_dir: str, mode: str) -> None:
    import torch
    import torch.distributed as dist

    import joule

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    batches = [(torch.randn(16, 32, generator=generator), torch.randint(0, 10, (16,), generator=generator))
               for _ in range(STEPS)]
    monitor = joule.Monitor(backend="sim", sim="count=1,load=1", interval_ms=10)

    if mode == "no-ninja":
        result = without_ninja(batches, monitor)
    else:
        result = ranks(batches, monitor)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def ranks(batches, monitor):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    import joule.torch

    reference = make_ddp()  # plain DDP, trained three times over the batches
    plain = train(reference, batches)
    plain_again = [train(reference, batches) for _ in range(2)]
    # The default: joule's C++ hook, in a session, outside one (it only
    # communicates), and in a second session.
    default_ddp = make_ddp()
    grads, default = attributed(default_ddp, batches, monitor)
    result = {"same_gradients_default": same(plain, grads), "default": default,
              "native_hook": default_ddp._joule_comm.native}
    result["same_gradients_outside"] = same(plain_again[0], train(default_ddp, batches))
    grads, result["again"] = attributed(default_ddp, batches, monitor)
    result["same_gradients_again"] = same(plain_again[1], grads)

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

    # allreduce=False: DDP keeps its built-in all-reduce (no comm hook of
    # joule's, which DDP would keep for good) and no all-reduce is recorded.
    untouched = make_ddp()
    with joule.torch.attribute(untouched, monitor, clock="host", allreduce=False) as session:
        grads = train(untouched, batches, session)
    result["not_asked"] = {"joule_hook": getattr(untouched, "_joule_comm", None) is not None,
                           "names": session.recorder.names, "same_gradients": same(plain, grads)}
    return result


def without_ninja(batches, monitor):
    """One rank with no ninja on PATH: the default records no all-reduce,
    allreduce=True through the Python hook, with a warning."""
    import warnings

    import joule.torch

    plain = train(make_ddp(), batches)
    default_ddp = make_ddp()
    with joule.torch.attribute(default_ddp, monitor, clock="host") as session:
        train(default_ddp, batches, session)
    result = {"default": {"joule_hook": getattr(default_ddp, "_joule_comm", None) is not None,
                          "names": session.recorder.names, "notes": session.notes}}
    asked = make_ddp()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads, summary = attributed(asked, batches, monitor, allreduce=True)
    summary.update(joule_hook=getattr(asked, "_joule_comm", None) is not None, native=asked._joule_comm.native,
                   warnings=[str(w.message) for w in caught], same_gradients=same(plain, grads))
    return {"default": result["default"], "asked": summary}


if __name__ == "__main__":
    rank_main(sys.argv[1], sys.argv[2])
