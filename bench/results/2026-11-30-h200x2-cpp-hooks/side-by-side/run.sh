#!/usr/bin/env bash
# One lease: install the wheel, put 2da9a2e's regions.py/clocks.py beside the new ones, run the probes.
set -uo pipefail
OUT=$1; shift
DEPTHS_DONE=""
T0=$(date +%s)
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
PY=/tmp/joule-venv/bin/python
SITE=$($PY -c 'import joule, os; print(os.path.dirname(joule.__file__))')
cp hookrun-before/regions_before.py hookrun-before/clocks_before.py $SITE/torch/
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $OUT/gpus.txt
K="plain;joule, phases;joule before, phases;hooks + one node pre-hook"
echo "install done $(( $(date +%s) - T0 )) s"
$PY bench/probes/edge_cost.py --n 50000 > $OUT/edge_cost.txt 2>&1; echo "edge_cost $(( $(date +%s) - T0 )) s"; cat $OUT/edge_cost.txt
for arg in "$@"; do
  case $arg in
    gpt2) $PY bench/probes/hook_parts.py --depth 2 --blocks 30 --block 5 --rounds 2 --kinds "$K" > $OUT/gpt-depth2.txt 2>&1 ;;
    gpt1) $PY bench/probes/hook_parts.py --depth 1 --blocks 30 --block 5 --rounds 1 --kinds "$K" > $OUT/gpt-depth1.txt 2>&1 ;;
    resnet2) $PY bench/probes/hook_parts.py --model resnet50 --depth 2 --blocks 20 --block 5 --kinds "$K" > $OUT/resnet50-depth2.txt 2>&1 ;;
    ddp2) $PY -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/hook_parts.py --ddp --depth 2 --blocks 15 --block 5 --kinds "$K" > $OUT/ddp-gpt-depth2.txt 2>&1 ;;
    ddp1) $PY -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/hook_parts.py --ddp --depth 1 --blocks 15 --block 5 --kinds "$K" > $OUT/ddp-gpt-depth1.txt 2>&1 ;;
  esac
  echo "$arg $(( $(date +%s) - T0 )) s"
done
tail -n 12 $OUT/*.txt | grep -v "^$" | tail -n 80
