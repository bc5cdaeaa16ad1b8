#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Read-only, 2 GPUs: joule.torch's C++ comm hook (issue 53, item 3) as a user
# meets it. Installs the wheel (bench/gpu_install.sh), builds the hook against
# the installed PyTorch at first use and loads it again from torch's cache
# (timed), prices it beside DDP's own all-reduce (bench/probes/comm_hook_cost.py,
# ROUNDS rounds), and attributes a DDP step with the all-reduce recorded
# (bench/gpu_attribution_ddp.py, the default allreduce=None). Changes no GPU setting.
# Usage (on the GPU machine, carry=["dist"]): bench/gpu_comm_hook.sh OUT [ROUNDS]
set -uo pipefail
out=$1
rounds=${2:-2}
t0=$(date +%s)
since() { echo "$1 $(($(date +%s) - t0)) s"; }
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.txt" 2>&1 ||
  { tail -30 "$out/install.txt"; exit 1; }
py=/tmp/joule-venv/bin/python
# ninja is torch's venv's (pip's); a fresh extension cache, as on a user's first run.
export PATH=/opt/torch/.venv/bin:$PATH TORCH_EXTENSIONS_DIR=/tmp/joule-torch-extensions
rm -rf "$TORCH_EXTENSIONS_DIR"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpus.txt"
since install
hook='import time, joule.torch; t = time.monotonic(); m = joule.torch.native_comm_hook(); print(m.__file__, f"{time.monotonic() - t:.1f} s")'
"$py" -c "$hook" >"$out/build.txt" 2>&1; since build; cat "$out/build.txt"
"$py" -c "$hook" >"$out/load.txt" 2>&1; since load; cat "$out/load.txt"
for round in $(seq 1 "$rounds"); do
  "$py" -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/comm_hook_cost.py --blocks 8 --block 15 \
    >"$out/comm_hook_cost-$round.txt" 2>&1
  since "comm_hook_cost round $round"; grep -v "^\s*$" "$out/comm_hook_cost-$round.txt" | tail -12
done
"$py" -m torch.distributed.run --standalone --nproc-per-node 2 bench/gpu_attribution_ddp.py --out-dir "$out/ddp" \
  --depth 1 --seconds 15 --response bench/results/2026-11-26-h200-attribution-proof/proof-response/result.json \
  >"$out/ddp.txt" 2>&1
since ddp; tail -25 "$out/ddp.txt"
