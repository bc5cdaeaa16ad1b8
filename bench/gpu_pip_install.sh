#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# joule installed on a GPU machine as a user installs it, then used: the
# checks of bench/README.md section "pip on a GPU machine". READ-ONLY: joule
# only reads NVML here; the examples only train.
# Usage: bash bench/gpu_pip_install.sh DIST_DIR OUT_DIR
#   DIST_DIR: scripts/build-dist.sh's output (the sdist and, for this
#   machine's Python, a wheel), carried to the machine.
set -u
dist=$1
out=$2
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
  echo "cores: $(nproc)"; python3 --version; g++ --version | head -1
  "$(dirname "$(command -v python3)")/cmake" --version 2>/dev/null | head -1 || cmake --version | head -1
  ldd --version | head -1
} 2>&1 | tee "$out/machine.txt"

# 1. The sdist, built on install (every core), then the prebuilt wheel.
bash bench/gpu_install.sh "$dist" /tmp/joule-sdist --sdist 2>&1 | tee "$out/install.txt"
bash bench/gpu_install.sh "$dist" /tmp/joule-venv 2>&1 | tee -a "$out/install.txt"
export PATH=/tmp/joule-venv/bin:$PATH
python=/tmp/joule-venv/bin/python

# 2. What joule sees, through NVML.
joule info 2>&1 | tee "$out/info.txt"
"$python" -c 'import joule, json; print(json.dumps(joule.devices(), indent=1))' 2>&1 | tee "$out/devices.json"

# 3. A training command measured, with its carbon.
joule measure --carbon-region DE -- "$python" examples/hf_trainer/train.py --seconds 20 --out-dir /tmp/hf-run \
  2>&1 | tee "$out/measure_hf.txt"

# 4. The Lightning and Accelerate examples, and joule.torch.attribute.
"$python" examples/lightning/train.py --seconds 20 --out-dir /tmp/lightning-run 2>&1 | tail -25 | tee "$out/lightning.txt"
"$python" examples/accelerate/train.py --seconds 20 --out-dir /tmp/accelerate-run 2>&1 | tail -25 | tee "$out/accelerate.txt"
"$python" - <<'PY' 2>&1 | tee "$out/attribute.txt"
import torch, joule, joule.torch, joule.attribution

monitor = joule.Monitor()
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
with joule.torch.attribute(model, monitor, optimizer=opt) as session:
    with monitor.window("train") as w:
        for step in range(300):
            with session.region("data"):
                batch = x * 1.0
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(batch), y).backward()
            opt.step()
        torch.cuda.synchronize()
for gpu, a in enumerate(session.result(w.settled(timeout_s=5.0), block_s=0.1)):
    print(joule.attribution.format_table(a, gpu_label=f"GPU {gpu}"))
PY

# 5. A window's cost from Python through the installed module, on this GPU.
"$python" bench/window_cost.py --windows 200000 --paced-s 5 --pacing sleep 2>&1 | tee "$out/window_cost.txt"
