#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Runs examples/lightning/train.py with the pieces of joule.lightning.EnergyCallback
timed call by call (perf_counter; the first tenth of each left out): where the
callback's time per batch goes inside a real Lightning run.
    PYTHONPATH=<joule package> python3 bench/probes/lightning_hook_breakdown.py OUT.json \
        examples/lightning/train.py --seconds 40 --no-tensorboard --joule-ab 20
(bench/README.md section 17)."""
import atexit, json, runpy, sys, time, statistics
out = sys.argv[1]
script = sys.argv[2]
sys.argv = sys.argv[2:]
import joule.lightning as jl, joule._run as jr, joule.meter as jm
stats = {}
def timed(owner, name, label):
    f = getattr(owner, name)
    acc = stats.setdefault(label, [])
    def w(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc.append(time.perf_counter() - t0)
    setattr(owner, name, w)
timed(jl, "batch_counts", "batch_counts")
timed(jl.LogCadence, "__call__", "LogCadence (loggers_take_this_step before)")
timed(jl, "logger_step", "logger_step")
timed(jr.EnergyRun, "step_begin", "run.step_begin")
timed(jr.EnergyRun, "step_end", "run.step_end")
timed(jr.EnergyRun, "step_metrics", "run.step_metrics")
timed(jm.PhaseMeter, "poll", "meter.poll")
timed(jm.PhaseMeter, "switch", "meter.switch")
timed(jl.EnergyCallback, "on_train_batch_start", "cb.on_train_batch_start")
timed(jl.EnergyCallback, "on_train_batch_end", "cb.on_train_batch_end")
try:
    from lightning.pytorch.loggers import CSVLogger
except ImportError:
    from pytorch_lightning.loggers import CSVLogger
timed(CSVLogger, "log_metrics", "CSVLogger.log_metrics")
def dump():
    res = {}
    for k, v in stats.items():
        if v:
            v2 = v[len(v) // 10:]
            res[k] = {"calls": len(v), "mean_us": statistics.fmean(v2) * 1e6, "median_us": statistics.median(v2) * 1e6,
                      "p90_us": sorted(v2)[int(0.9 * len(v2))] * 1e6, "total_s": sum(v)}
    json.dump(res, open(out, "w"), indent=1)
atexit.register(dump)
runpy.run_path(script, run_name="__main__")
