#!/usr/bin/env bash
# One lease: install the wheel; the C++ pre-hook floor beside the Python one and joule's hooks.
set -uo pipefail
OUT=$1
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
PY=/tmp/joule-venv/bin/python
export PATH=/tmp/joule-venv/bin:/opt/torch/.venv/bin:$PATH
{ which ninja g++; $PY -c "import torch.utils.cpp_extension as c; c.verify_ninja_availability(); print('ninja ok')"; } > $OUT/tools.txt 2>&1
T0=$(date +%s)
(cd bench/probes && $PY cpp_prehook.py) > $OUT/compile.txt 2>&1; echo "compiled $(( $(date +%s) - T0 )) s"; tail -3 $OUT/compile.txt
K="plain;forward wrapper;hooks + one node pre-hook;hooks + one C++ node pre-hook;wrapper + one C++ node pre-hook;joule, phases"
$PY -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/hook_parts.py --ddp --cpp-prehook --depth 2 --blocks 15 --block 5 --rounds 2 --kinds "$K" > $OUT/ddp-gpt-depth2.txt 2>&1
echo "ddp $(( $(date +%s) - T0 )) s"
$PY bench/probes/hook_parts.py --cpp-prehook --depth 2 --blocks 20 --block 5 --kinds "$K" > $OUT/gpt-depth2.txt 2>&1
echo "single $(( $(date +%s) - T0 )) s"
cat $OUT/tools.txt; grep -v "^\*\|OMP_NUM\|Warning" $OUT/ddp-gpt-depth2.txt $OUT/gpt-depth2.txt | tail -40
