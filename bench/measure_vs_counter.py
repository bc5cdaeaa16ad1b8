#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Whole-command energy: `joule measure --json` around a load, against the
GPU's energy counter read with pynvml right before and after (read-only).

Usage: measure_vs_counter.py JOULE_BINARY -- LOAD COMMAND...
The counter brackets joule's own start and stop too (a fraction of a second
at idle power), so expect joule a little below the counter.
"""
import json
import subprocess
import sys
import time

import pynvml as n


def main() -> None:
    joule = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1:]
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    t0, e0 = time.monotonic(), n.nvmlDeviceGetTotalEnergyConsumption(h)
    out = subprocess.run([joule, "measure", "--json", "--gpus", "0", "--", *command], check=True,
                         capture_output=True, text=True).stdout
    t1, e1 = time.monotonic(), n.nvmlDeviceGetTotalEnergyConsumption(h)
    report = json.loads(out)
    gpu = next(d for d in report["devices"] if d["id"] == "gpu0")
    counter_j = (e1 - e0) / 1000.0
    print(f"command {' '.join(command)}: joule {report['elapsed_s']:.2f} s, {gpu['energy_j']:.1f} J "
          f"(settled {report['settled']}, {gpu.get('energy_method', '?')}); counter around it "
          f"{t1 - t0:.2f} s, {counter_j:.1f} J; joule / counter - 1 = {100 * (gpu['energy_j'] / counter_j - 1):+.2f}%")


if __name__ == "__main__":
    main()
