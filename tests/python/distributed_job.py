# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""One rank of a torch.distributed job measured with joule.distributed, for
test_distributed.py (run as a process per rank, or under torchrun).

    distributed_job.py SCENARIO OUT_DIR

The launcher sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, and the joule
environment (simulated GPUs, JOULE_RANKS_PER_NODE). Each rank writes
OUT_DIR/rank<R>.json: its node, whether it leads it, each window's report
(None where it got none), how long each call took, the warnings it gave.

Scenarios (rank 2 leads the second node when there are 2 ranks per node):
  normal     two windows, broadcast=True: every rank gets the reports
  hang       timeout_s=3; rank 2 sleeps 5 s before the first window's end,
             then a second window follows
  fail       rank 2's measurement raises at the end of the window
  die        rank 2 exits before the end of the window
  one        one window of 0.5 s (the launcher sets what it tests: a GPU that
             fails inside it, CUDA_VISIBLE_DEVICES)
"""
import datetime
import json
import os
import sys
import time
import warnings

import torch.distributed as dist

import joule
import joule.distributed


class FailingMonitor:
    """A leader's monitor whose window end raises, as a lost GPU's driver can."""

    def __init__(self, monitor):
        self._monitor = monitor

    def begin_window(self, name):
        self._monitor.begin_window(name)

    def end_window(self, name):
        raise joule.DeviceError("gpu0: GPU is lost (injected by the test)")


def main() -> int:
    scenario, out_dir = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    result = {"rank": rank, "reports": {}, "seconds": {}, "warnings": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timeout_s = 3.0 if scenario in ("hang", "die", "fail") else 20.0
        monitor = joule.distributed.DistributedMonitor(interval_ms=10, timeout_s=timeout_s,
                                                       broadcast=scenario == "normal")
        result.update(node=monitor.node, leader=monitor.leader, measures=monitor.monitor is not None,
                      nodes=monitor.nodes)
        if scenario == "fail" and rank == 2:
            monitor.monitor = FailingMonitor(monitor.monitor)

        def timed(label, call):
            start = time.monotonic()
            value = call()
            result["seconds"][label] = time.monotonic() - start
            return value

        def keep(name, report):
            result["reports"][name] = None if report is None else {"json": report.json, "text": report.text}

        timed("begin w1", lambda: monitor.begin_window("w1"))
        time.sleep(0.5)
        if scenario == "hang" and rank == 2:
            time.sleep(5.0)
        if scenario == "die" and rank == 2:
            os._exit(3)
        keep("w1", timed("end w1", lambda: monitor.end_window("w1")))
        if scenario in ("normal", "hang"):
            start = time.monotonic()
            with monitor.window("w2") as w:
                time.sleep(0.3)
            result["seconds"]["w2"] = time.monotonic() - start
            keep("w2", w.report)
            result["lost_ranks"] = {str(r): why for r, why in monitor.lost_ranks.items()}
    result["warnings"] = [str(w.message) for w in caught]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    # No job-wide barrier at the end (in the failure scenarios a rank is
    # gone), but rank 0, which serves the job's store, stays until the other
    # ranks are done with it.
    if rank == 0:
        others = [r for r in range(1, int(os.environ["WORLD_SIZE"])) if not (scenario == "die" and r == 2)]
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(out_dir, f"rank{r}.json")) for r in others):
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
