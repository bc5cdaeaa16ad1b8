#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# joule.distributed and joule measure --mpi on a GPU machine, read-only
# (observer: no GPU setting changes). bench/carry.sh CARRY_DIR first, here.
#   bench/gpu_distributed.sh CARRY_DIR OUT_DIR
# Runs bench/gpu_distributed.py under torchrun: NCCL with one rank per GPU,
# and Gloo with two ranks sharing each GPU (the node's GPUs counted once);
# then, where the machine's mpirun can run the carried joule, a two-rank
# joule measure --mpi around a GPU load, against the energy counters.
set -uo pipefail
carry=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent
bench/build_python_module_on_device.sh "$carry" /tmp/pkg/joule > "$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/pkg
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
echo "== NCCL, $gpus rank(s), one per GPU"
torchrun --standalone --nproc-per-node "$gpus" bench/gpu_distributed.py --backend nccl --out "$out/nccl.json" 2>&1 |
  grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*" | tee "$out/nccl.txt"
echo "== Gloo, $((2 * gpus)) ranks, two per GPU"
torchrun --standalone --nproc-per-node $((2 * gpus)) bench/gpu_distributed.py --backend gloo --seconds 15 --out "$out/gloo.json" 2>&1 |
  grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*" | tee "$out/gloo.txt"
echo "== joule measure --mpi under this machine's mpirun"
{ which mpirun && mpirun --version | head -2; } 2>&1 | tee "$out/mpi.txt"
if command -v mpirun > /dev/null; then
  mpi_lib=$(dirname "$(ldconfig -p | awk '/libmpi.so.40 /{print $NF; exit}')" 2>/dev/null)
  # The machine's own Open MPI first (its plugins match its mpirun), then what joule carried.
  export LD_LIBRARY_PATH=${mpi_lib:+$mpi_lib:}$carry/lib
  python3 - "$carry/bin/joule" "$out/mpi.json" <<'PY' 2>&1 | tee -a "$out/mpi.txt"
import json, subprocess, sys, time
import pynvml as n
joule, path = sys.argv[1], sys.argv[2]
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
e0 = [n.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles]
t0 = time.monotonic()
run = subprocess.run(["timeout", "180", "mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "LD_LIBRARY_PATH",
                      "-x", "JOULE_POWERCAP_ROOT", joule, "measure", "--mpi", "--json", "--mpi-timeout", "30", "--",
                      "python3", "bench/gpu_load.py", "--mode", "pulse", "--seconds", "15"], capture_output=True, text=True)
t1 = time.monotonic()
e1 = [n.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles]
print("mpirun exit", run.returncode, run.stderr[-1500:])
if run.returncode == 0:
    report = json.loads(run.stdout)
    json.dump(report, open(path, "w"), indent=2)
    gpus = [d for d in report["nodes"][0]["devices"] if d["kind"] == "gpu"]
    for g, a, b in zip(gpus, e0, e1):
        print(f"{g['name']}: joule {g['energy_j']:.1f} J in {report['elapsed_s']:.2f} s; counter around mpirun "
              f"{(b - a) / 1000:.1f} J in {t1 - t0:.2f} s")
PY
fi
