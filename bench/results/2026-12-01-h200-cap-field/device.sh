#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root: `joule measure --sample cap` as a user
# runs it, over a bf16 matmul loop (which holds an H200 at its power cap) and over an idle sleep, beside
# NVML's own reasons read by pynvml. Outputs in $OUT/cap-field.tgz.
set -uo pipefail
export CUDA_DEVICE_ORDER=PCI_BUS_ID
out=/tmp/cap-field; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/cap-field.tgz" -C /tmp cap-field' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
cat "$out/install.log"
source /tmp/joule-venv/bin/activate
nvidia-smi --query-gpu=name,driver_version,power.limit,temperature.gpu --format=csv >"$out/gpu.csv"
load='import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
until = time.time() + 8
while time.time() < until:
    for _ in range(20): torch.mm(a, b)
    torch.cuda.synchronize()'
for what in matmul idle; do
  cmd=(python -c "$load"); [[ $what == idle ]] && cmd=(sleep 4)
  joule measure --gpus 0 --interval-ms 20 --sample cap,clock --timeline "$out/$what.csv" --json -o "$out/$what.json" \
    -- "${cmd[@]}" 2>"$out/$what.err"
  python - "$out/$what.json" "$out/$what.csv" <<'PY'
import csv, json, sys
r = json.load(open(sys.argv[1]))["devices"][0]
rows = [row for row in csv.DictReader(open(sys.argv[2])) if row["device"] == "gpu0"]
read = [row for row in rows if row["power_capped"] != ""]
print(f'{sys.argv[1]}: {r["energy_j"]:.0f} J, peak {r["peak_power_w"]:.0f} W, at the cap in '
      f'{100 * r.get("power_capped_share", float("nan")):.1f}% of samples; timeline: {len(read)} of {len(rows)} '
      f'rows with the state, {sum(row["power_capped"] == "1" for row in read)} at the cap')
PY
done
