#!/usr/bin/env bash
# One lease: where ResNet-50's depth-2 overhead goes.
set -uo pipefail
OUT=$1
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
PY=/tmp/joule-venv/bin/python
K="plain;hooks + one node pre-hook;hooks + GPU edges;joule, forward only;joule, phases;joule, phases, host edges"
$PY bench/probes/hook_parts.py --model resnet50 --depth 2 --blocks 20 --block 5 --rounds 2 --kinds "$K" > $OUT/resnet50-depth2-parts.txt 2>&1
cat $OUT/resnet50-depth2-parts.txt
