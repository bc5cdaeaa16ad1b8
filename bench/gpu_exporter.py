#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""`joule exporter` on a real GPU, scraped by a real Prometheus, against the NVML energy counter.

READ-ONLY: the exporter only reads NVML; the jobs only run kernels. Runs two PyTorch jobs one after
the other on GPU 0, each with its own SLURM_JOB_ID (so each is its own `joule_job`), with idle gaps
around them, while Prometheus scrapes the exporter every second and this script reads the GPU's
energy counter (pynvml) every 50 ms with wall-clock stamps. Then, from what Prometheus stored (raw
samples through its query API):

  - the exporter's energy between two scrapes against the counter over the same span, the span's
    edges taken from `joule_exporter_accounted_until_seconds` (the time up to which the counters
    were accounted), for each job (edges in the idle gaps) and for every 30 s and 60 s span;
  - each job's `joule_job_gpu_energy_joules_total` against the counter over its process's life;
  - the exporter's CPU time (utime + stime) per second of wall time, and the latency of a scrape.

  python3 bench/gpu_exporter.py --joule BIN --prometheus BIN --out DIR
"""
import argparse
import bisect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import pynvml

HERE = os.path.dirname(os.path.abspath(__file__))


def http_get(url, timeout=10.0):
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return reply.read().decode()


class CounterPoller(threading.Thread):
    """The GPU's energy counter (mJ) every period_s, stamped with the wall clock mid-call; and, every
    fourth time, the processes NVML lists on the GPU (when each pid was first and last seen)."""

    def __init__(self, handle, period_s=0.05):
        super().__init__(daemon=True)
        self.handle, self.period_s = handle, period_s
        self.times, self.energy_mj = [], []
        self.first_seen, self.last_seen = {}, {}
        self.stop = threading.Event()

    def run(self):
        ticks = 0
        while not self.stop.is_set():
            before = time.time()
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
            after = time.time()
            self.times.append((before + after) / 2)
            self.energy_mj.append(e)
            if ticks % 4 == 0:
                now = time.time()
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    self.first_seen.setdefault(p.pid, now)
                    self.last_seen[p.pid] = now
            ticks += 1
            self.stop.wait(self.period_s)

    def joules_at(self, t):
        """The counter at wall time t, interpolated linearly between the reads around it."""
        i = bisect.bisect_left(self.times, t)
        if i <= 0 or i >= len(self.times):
            raise ValueError(f"time {t} outside the polled span")
        t0, t1 = self.times[i - 1], self.times[i]
        e0, e1 = self.energy_mj[i - 1], self.energy_mj[i]
        return (e0 + (e1 - e0) * (t - t0) / (t1 - t0)) / 1000.0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raw_samples(prom, series):
    """Every stored sample of one series: [(scrape time, value)]."""
    q = urllib.parse.urlencode({"query": f"{series}[1h]"})
    reply = json.loads(http_get(f"{prom}/api/v1/query?{q}"))
    result = reply["data"]["result"]
    out = {}
    for r in result:
        key = tuple(sorted(r["metric"].items()))
        out[key] = [(float(t), float(v)) for t, v in r["values"]]
    return out


def run_job(name, argv, job_id, log):
    env = dict(os.environ, SLURM_JOB_ID=str(job_id))
    start = time.time()
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.wait()
    end = time.time()
    print(f"{name}: exit {proc.returncode}, {end - start:.1f} s", flush=True)
    return {"name": name, "job": f"slurm/{job_id}", "pid": proc.pid, "start": start, "end": end, "exit": proc.returncode}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--joule", required=True)
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--load-s", type=float, default=80.0)
    parser.add_argument("--train-epochs", type=int, default=2)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "gpu_exporter.log"), "w")

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    poller = CounterPoller(handle)
    poller.start()

    work = tempfile.mkdtemp(prefix="joule-exporter-bench-")
    exporter = subprocess.Popen([args.joule, "exporter", "--listen", "127.0.0.1:9400", "--interval-s", "1",
                                 "--jouled-socket", ""], stdout=log, stderr=subprocess.STDOUT)
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                "  - job_name: joule\n    static_configs:\n      - targets: ['127.0.0.1:9400']\n")
    prometheus = subprocess.Popen([args.prometheus, f"--config.file={work}/prometheus.yml",
                                   f"--storage.tsdb.path={work}/data", "--web.listen-address=127.0.0.1:9090",
                                   "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
    prom = "http://127.0.0.1:9090"
    for _ in range(300):
        try:
            if "Ready" in http_get(f"{prom}/-/ready", 1.0) and "DCGM_FI_DEV_POWER_USAGE" in http_get(
                    "http://127.0.0.1:9400/metrics", 1.0):
                break
        except Exception:
            pass
        time.sleep(0.1)
    else:
        sys.exit("exporter or Prometheus did not start; see gpu_exporter.log")
    metrics = http_get("http://127.0.0.1:9400/metrics")
    with open(os.path.join(args.out, "metrics_first.txt"), "w") as f:
        f.write(metrics)
    cpu_start, wall_start = cpu_seconds(exporter.pid), time.time()

    time.sleep(args.idle_s)
    jobs = [run_job("random on/off matmuls", [sys.executable, os.path.join(HERE, "gpu_load.py"), "--mode", "random",
                                              "--seed", "11", "--seconds", str(args.load_s)], 101, log)]
    time.sleep(args.idle_s)
    jobs.append(run_job("ResNet-18 training", [sys.executable, os.path.join(HERE, "ddp_train.py"), "--batch-size", "256",
                                               "--dataset", "51200", "--epochs", str(args.train_epochs)], 102, log))
    time.sleep(args.idle_s)

    cpu_used, wall_used = cpu_seconds(exporter.pid) - cpu_start, time.time() - wall_start
    latencies_ms = []
    for _ in range(200):
        t0 = time.perf_counter()
        http_get("http://127.0.0.1:9400/metrics")
        latencies_ms.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.005)
    time.sleep(2.5)  # the last scrapes land
    metrics = http_get("http://127.0.0.1:9400/metrics")
    with open(os.path.join(args.out, "metrics_last.txt"), "w") as f:
        f.write(metrics)

    energy = list(raw_samples(prom, 'joule_gpu_energy_joules_total{gpu="0"}').values())[0]
    until = dict(list(raw_samples(prom, "joule_exporter_accounted_until_seconds").values())[0])
    dcgm = dict(list(raw_samples(prom, 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}').values())[0])
    per_job = raw_samples(prom, 'joule_job_gpu_energy_joules_total{gpu="0"}')
    scrapes = [(t, until[t], e) for t, e in energy if t in until]  # (scrape, accounted until, J)

    def span(a, b):
        exporter_j = b[2] - a[2]
        counter_j = poller.joules_at(b[1]) - poller.joules_at(a[1])
        return exporter_j, counter_j

    result = {"gpu": pynvml.nvmlDeviceGetName(handle), "driver": pynvml.nvmlSystemGetDriverVersion(),
              "scrapes": len(scrapes), "jobs": [], "spans": {}}
    for job in jobs:
        a = max((s for s in scrapes if s[1] <= job["start"] - 1.0), key=lambda s: s[1])
        b = min((s for s in scrapes if s[1] >= job["end"] + 1.0), key=lambda s: s[1])
        exporter_j, counter_j = span(a, b)
        job_series = [v for k, v in per_job.items() if dict(k).get("joule_job") == job["job"]]
        job_j = None
        if job_series:
            values = dict(job_series[0])
            job_j = values.get(b[0], job_series[0][-1][1]) - values.get(a[0], 0.0)
        counter_life_j = poller.joules_at(job["end"]) - poller.joules_at(job["start"])
        listed = (poller.first_seen.get(job["pid"]), poller.last_seen.get(job["pid"]))
        counter_listed_j = poller.joules_at(listed[1]) - poller.joules_at(listed[0]) if listed[0] else None
        entry = dict(job, exporter_j=exporter_j, counter_j=counter_j, error=exporter_j / counter_j - 1,
                     span_s=b[1] - a[1], job_series_j=job_j, counter_over_process_life_j=counter_life_j,
                     listed_s=(listed[1] - listed[0]) if listed[0] else None, counter_while_listed_j=counter_listed_j)
        result["jobs"].append(entry)
        print(f"{job['name']}: exporter {exporter_j:.1f} J, counter {counter_j:.1f} J over {b[1] - a[1]:.1f} s: "
              f"{100 * entry['error']:+.3f}%; joule_job {job['job']}: {job_j} J; counter over the process's life "
              f"{counter_life_j:.1f} J ({job['end'] - job['start']:.1f} s), while NVML listed it {counter_listed_j} J "
              f"({entry['listed_s']} s)", flush=True)
    for length_s in (30, 60):
        errors = []
        for i, a in enumerate(scrapes):
            later = [s for s in scrapes[i + 1:] if s[1] - a[1] >= length_s]
            if not later:
                break
            exporter_j, counter_j = span(a, later[0])
            errors.append(exporter_j / counter_j - 1)
        result["spans"][f"{length_s}s"] = {
            "n": len(errors), "mean_abs_pct": 100 * statistics.mean(abs(e) for e in errors),
            "max_abs_pct": 100 * max(abs(e) for e in errors), "mean_pct": 100 * statistics.mean(errors)}
        print(f"every {length_s} s span ({len(errors)}): mean |error| "
              f"{result['spans'][f'{length_s}s']['mean_abs_pct']:.3f}%, max {result['spans'][f'{length_s}s']['max_abs_pct']:.3f}%, "
              f"mean {result['spans'][f'{length_s}s']['mean_pct']:+.3f}%", flush=True)
    result["dcgm_total_energy_matches_joules"] = all(abs(dcgm[t] / 1000 - e) < 1e-6 * max(1, e) for t, e in energy if t in dcgm)
    result["exporter_cpu_pct_of_one_core"] = 100 * cpu_used / wall_used
    result["scrape_latency_ms"] = {"median": statistics.median(latencies_ms),
                                   "p99": sorted(latencies_ms)[int(0.99 * len(latencies_ms)) - 1]}
    print(f"exporter CPU: {result['exporter_cpu_pct_of_one_core']:.2f}% of one core over {wall_used:.0f} s; "
          f"scrape latency median {result['scrape_latency_ms']['median']:.2f} ms, p99 {result['scrape_latency_ms']['p99']:.2f} ms",
          flush=True)
    with open(os.path.join(args.out, "gpu_exporter.json"), "w") as f:
        json.dump(result, f, indent=2)

    poller.stop.set()
    for p in (prometheus, exporter):
        p.terminate()
        p.wait(timeout=20)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
