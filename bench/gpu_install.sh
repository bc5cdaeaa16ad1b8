#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Installs joule on a GPU machine the way a user does (docs/install.md): into
# a fresh venv that sees the installed PyTorch, with pip, offline, from the
# artifacts scripts/build-dist.sh made here. The bench's GPU scripts all
# start with it, so what they measure is what users install.
# Usage: bench/gpu_install.sh DIST_DIR VENV [--sdist]
#   DIST_DIR holds joule-X.tar.gz and, where one was made for this Python,
#   a joule-X-cpXY-...whl (carry it: run(carry=["dist"])). The wheel is
#   installed where it fits this Python (pip decides), else the sdist is
#   built (needs g++ >= 10, CMake >= 3.25 and the Python headers); --sdist
#   builds the sdist always. VENV is made anew. Prints what it installed and
#   how long it took; `source VENV/bin/activate` (or VENV/bin/python) after.
#
# "Sees the installed PyTorch": the venv is made by the Python that has torch
# with --system-site-packages; where that Python is itself a venv (whose
# packages a new venv does not see), a .pth file adds its site-packages.
set -euo pipefail
dist=$(cd "$1" && pwd)
venv=$2
from_sdist=${3:-}
python=${JOULE_PYTHON:-python3}
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  "$python" -c 'import torch, sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/installed-torch.pth"
fi
# CMake may be a pip package beside torch (its bin/ is then not on PATH).
cmake_dir=$(dirname "$(command -v "$python")")
export PATH=$venv/bin:$PATH:$cmake_dir
sdists=("$dist"/joule-*.tar.gz)
started=$EPOCHREALTIME
if [[ -z $from_sdist ]] && "$venv/bin/python" -m pip install --no-index --no-deps --only-binary :all: --find-links "$dist" \
     joule >"$venv/install.log" 2>&1; then
  how="prebuilt wheel"
else
  "$venv/bin/python" -m pip install --no-index --no-deps "${sdists[0]}" >"$venv/install.log" 2>&1 ||
    { tail -30 "$venv/install.log" >&2; echo "gpu_install.sh: pip install ${sdists[0]} failed" >&2; exit 1; }
  how="built from $(basename "${sdists[0]}") on $(nproc) cores"
fi
seconds=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "gpu_install.sh: joule $("$venv/bin/joule" --version | awk '{print $2}') installed in $venv ($how) in ${seconds} s;" \
     "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
