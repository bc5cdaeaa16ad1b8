#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# joule.distributed and joule measure --mpi on a GPU machine, read-only
# (observer: no GPU setting changes).
#   scripts/build-dist.sh --python PYTHON   # here: dist/ (PYTHON of the GPU machine's version, e.g. pyenv's 3.12)
#   bench/carry.sh .device-carry            # here, only for the --mpi part (below)
#   bench/gpu_distributed.sh dist OUT_DIR [.device-carry]   # there, carry=["dist", ".device-carry"]
# Installs joule from DIST_DIR with bench/gpu_install.sh into /tmp/joule-venv
# (as a user does: the wheel, else the sdist built there), then runs
# bench/gpu_distributed.py with that venv's Python under torch.distributed.run
# (torchrun's module: the system's torchrun script would start the ranks with
# a Python that lacks the venv's joule): NCCL with one rank per GPU, and Gloo
# with two ranks sharing each GPU (the node's GPUs counted once); then, where
# the machine has an mpirun, a two-rank joule measure --mpi around a GPU load,
# against the energy counters. The prebuilt wheel leaves MPI out (it links
# nothing but libc, libm and libstdc++), so that part runs the installed joule
# where it has MPI (an sdist built where an MPI is found), else CARRY_DIR's
# (bench/carry.sh: this checkout's build, with its libraries), else is skipped.
set -uo pipefail
dist=$1
out=$2
carry=${3:+$(cd "$3" && pwd)}
mkdir -p "$out"
venv=/tmp/joule-venv
bench/gpu_install.sh "$dist" "$venv" 2>&1 | tee "$out/install.txt" || exit 1
export PATH=$venv/bin:$PATH
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
echo "== NCCL, $gpus rank(s), one per GPU"
python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/gpu_distributed.py --backend nccl --out "$out/nccl.json" 2>&1 |
  grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*" | tee "$out/nccl.txt"
echo "== Gloo, $((2 * gpus)) ranks, two per GPU"
python3 -m torch.distributed.run --standalone --nproc-per-node $((2 * gpus)) bench/gpu_distributed.py --backend gloo --seconds 15 --out "$out/gloo.json" 2>&1 |
  grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*" | tee "$out/gloo.txt"
echo "== joule measure --mpi under this machine's mpirun"
{ which mpirun && mpirun --version | head -2; } 2>&1 | tee "$out/mpi.txt"
# The joule for it: the installed one where it was built with MPI, else the carried build.
joule=
if command -v mpirun > /dev/null; then
  joule=$venv/bin/joule
  if timeout 60 "$joule" measure --mpi -- true 2>&1 | grep -q "built without MPI"; then
    joule=${carry:+$carry/bin/joule}
    echo "the installed joule has no MPI (the wheel leaves it out): ${joule:-no CARRY_DIR given, skipped}" |
      tee -a "$out/mpi.txt"
  fi
fi
if [[ -n $joule ]]; then
  mpi_lib=$(dirname "$(ldconfig -p | awk '/libmpi.so.40 /{print $NF; exit}')" 2>/dev/null)
  # The machine's own Open MPI first (its plugins match its mpirun), then what the carry has.
  export LD_LIBRARY_PATH=$mpi_lib${carry:+${mpi_lib:+:}$carry/lib}
  python3 - "$joule" "$out/mpi.json" <<'PY' 2>&1 | tee -a "$out/mpi.txt"
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
