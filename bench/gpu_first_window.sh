#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The first window after a monitor is made, against the energy counters, on
# a GPU machine, read-only (no GPU setting changes).
#   scripts/build-dist.sh --python PYTHON     # here: dist/ (PYTHON of the GPU machine's version, e.g. pyenv's 3.12)
#   bench/gpu_first_window.sh DIST_DIR OUT_DIR [REPEATS [OLD_DIST_DIR]]   # there, carry=["dist"]
# Installs joule from DIST_DIR with bench/gpu_install.sh into /tmp/joule-venv
# (as a user does: the wheel, else the sdist built there), then with that
# venv's Python: NCCL with one rank per GPU, Gloo with two ranks per GPU (under
# torch.distributed.run, torchrun's module, so the ranks get the venv's
# Python), NCCL with the leader priming its monitor, and one process with a
# plain joule.Monitor over every GPU; REPEATS (default 2) of each, into
# OUT_DIR/{nccl,gloo,nccl-prime,single}-R.json.
# OLD_DIST_DIR: another version's dist dir (scripts/build-dist.sh --out DIR in
# a checkout of it; carry it too), installed into /tmp/joule-venv-old; every
# case then runs with both, one after the other, the old one's files named
# old-*.json: before and after a change in one run. (This replaces the
# source dir of an older version that the carried libjoule.a's binding was
# once compiled from; a version from before scripts/build-dist.sh existed has
# no dist dir.) This checkout's bench/gpu_first_window.py runs with both.
set -uo pipefail
dist=$1
out=$2
repeats=${3:-2}
old_dist=${4:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent
# Each joule to run: its venv and its files' prefix.
venvs=(/tmp/joule-venv) prefixes=("")
bench/gpu_install.sh "$dist" /tmp/joule-venv 2>&1 | tee "$out/install.txt" || exit 1
if [[ -n $old_dist ]]; then
  bench/gpu_install.sh "$old_dist" /tmp/joule-venv-old 2>&1 | tee "$out/install-old.txt" || exit 1
  venvs+=(/tmp/joule-venv-old) prefixes+=(old-)
fi
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
quiet() { grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*"; }
for r in $(seq "$repeats"); do
  for i in "${!venvs[@]}"; do
    py=${venvs[i]}/bin/python prefix=${prefixes[i]}
    label=${prefix:+ (the old version)}
    echo "== NCCL, $gpus rank(s), run $r$label"
    "$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/gpu_first_window.py --backend nccl \
      --out "$out/${prefix}nccl-$r.json" 2>&1 | quiet
    echo "== Gloo, $((2 * gpus)) ranks, run $r$label"
    "$py" -m torch.distributed.run --standalone --nproc-per-node $((2 * gpus)) bench/gpu_first_window.py --backend gloo \
      --out "$out/${prefix}gloo-$r.json" 2>&1 | quiet
    echo "== NCCL, $gpus rank(s), the leader primes its monitor, run $r$label"
    "$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/gpu_first_window.py --backend nccl --prime \
      --out "$out/${prefix}nccl-prime-$r.json" 2>&1 | quiet
    echo "== one process, joule.Monitor over $gpus GPU(s), run $r$label"
    "$py" bench/gpu_first_window.py --single --out "$out/${prefix}single-$r.json" 2>&1 | quiet
  done
done
