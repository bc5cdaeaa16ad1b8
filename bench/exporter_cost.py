#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What `joule exporter` costs: its CPU time per second of wall time, per GPU, and a scrape's latency.

Runs the real exporter for --seconds on GPUs of the fake libnvidia-ml.so.1 set up like an H100
(driver 580: 20 ms power samples, counter steps of 100 ms at 4 ms of busy CPU a read, random on/off
load) with --processes processes on each (real `sleep` processes, each its own Slurm job through
SLURM_JOB_ID), or on the real driver (--nvml), scraped every --scrape-interval-s as Prometheus would.
CPU time is the exporter process's utime + stime from /proc.

  python3 bench/exporter_cost.py --joule build/bin/joule --fake-nvml build/tests/fake_nvml/libnvidia-ml.so.1 --gpus 8
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--joule", required=True)
    parser.add_argument("--fake-nvml", help="the fake library; without it, --nvml")
    parser.add_argument("--nvml", action="store_true", help="the real driver")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--processes", type=int, default=2, help="per GPU (fake only)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval-s", type=float, default=1.0, help="the exporter's accounting step")
    parser.add_argument("--scrape-interval-s", type=float, default=1.0)
    parser.add_argument("--port", type=int, default=19400)
    parser.add_argument("--sm-util", type=int, default=None,
                        help="the fake driver samples each process at this SM utilisation (per-process utilisation split)")
    parser.add_argument("--ledger", action="store_true",
                        help="keep a job ledger (joule exporter --ledger, in a scratch directory)")
    args = parser.parse_args()

    env = dict(os.environ, JOULE_POWERCAP_ROOT="/nonexistent")
    sleepers = []
    work = tempfile.mkdtemp(prefix="joule-exporter-cost-")
    if not args.nvml:
        if not args.fake_nvml:
            sys.exit("--fake-nvml LIB or --nvml")
        lines = []
        for g in range(args.gpus):
            lines.append(f'device name="NVIDIA H100 80GB HBM3 (fake)" power_w=100 pulse_w=700 profile=random '
                         f"seed={3 + g} min_phase_ms=150 max_phase_ms=2500 min_limit_w=200 max_limit_w=700 "
                         "energy_call_ms=4 energy_update_ms=100 power_update_ms=100 usage_window_ms=1000 "
                         "sample_ms=20 sample_buffer=120 sample_stamp_lead_ms=4.5")
            for p in range(args.processes):
                sleeper = subprocess.Popen(["sleep", str(args.seconds + 60)],
                                           env=dict(os.environ, SLURM_JOB_ID=str(1000 + g * args.processes + p)))
                sleepers.append(sleeper)
                util = f" sm_util={args.sm_util}" if args.sm_util is not None else ""
                lines.append(f"process device={g} pid={sleeper.pid} used_mib=1024{util}")
        config = os.path.join(work, "fake.conf")
        with open(config, "w") as f:
            f.write("\n".join(lines) + "\n")
        env.update(JOULE_NVML_LIBRARY=args.fake_nvml, JOULE_FAKE_NVML_CONFIG=config)
    command = [args.joule, "exporter", "--listen", f"127.0.0.1:{args.port}", "--interval-s", str(args.interval_s),
               "--jouled-socket", ""]
    if args.ledger:
        command += ["--ledger", os.path.join(work, "ledger.json")]
    exporter = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{args.port}/metrics"
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except Exception:
            time.sleep(0.1)
    time.sleep(2.0)  # past start-up (device probing, the first counter reads)
    cpu_start, wall_start = cpu_seconds(exporter.pid), time.monotonic()
    latencies_ms, size = [], 0
    while time.monotonic() - wall_start < args.seconds:
        t0 = time.perf_counter()
        size = len(urllib.request.urlopen(url, timeout=5).read())
        latencies_ms.append(1000 * (time.perf_counter() - t0))
        time.sleep(max(0.0, args.scrape_interval_s - (time.perf_counter() - t0)))
    cpu_pct = 100 * (cpu_seconds(exporter.pid) - cpu_start) / (time.monotonic() - wall_start)
    exporter.terminate()
    exporter.wait(timeout=20)
    for s in sleepers:
        s.kill()
        s.wait()
    gpus = args.gpus if not args.nvml else "all"
    print(f"backend={'nvml' if args.nvml else 'fake'} gpus={gpus} processes/gpu={args.processes if not args.nvml else '-'} "
          f"interval={args.interval_s}s scrapes={len(latencies_ms)}: CPU {cpu_pct:.2f}% of one core"
          + (f" ({cpu_pct / args.gpus:.2f}% per GPU)" if not args.nvml else "")
          + f"; scrape median {statistics.median(latencies_ms):.2f} ms, max {max(latencies_ms):.2f} ms, {size} bytes")


if __name__ == "__main__":
    main()
