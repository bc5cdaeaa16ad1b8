#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Runs a script with the interpreter's garbage collections recorded (start on
time.monotonic, duration, generation) and, at exit, the count of tracked objects
and the commonest types: whether joule's hooks change a training process's GC.
    python3 bench/probes/gc_pauses.py OUT.json examples/lightning/train.py --seconds 60 [--no-joule]
(bench/README.md section 17)."""
import gc, json, runpy, sys, time, atexit
out = sys.argv[1]
script = sys.argv[2]
sys.argv = sys.argv[2:]
events = []
state = {}
def cb(phase, info):
    if phase == "start":
        state["t"] = time.monotonic()
    else:
        t0 = state.get("t")
        if t0 is not None:
            events.append((t0, time.monotonic() - t0, info["generation"], info["collected"]))
gc.callbacks.append(cb)
def dump():
    import collections
    objs = gc.get_objects()
    c = collections.Counter(repr(type(o)) for o in objs)
    json.dump({"events": events, "objects": len(objs), "top": c.most_common(25)}, open(out, "w"))
atexit.register(dump)
runpy.run_path(script, run_name="__main__")
