# The third lease's command (run(kind="nvidia-h200-x2", carry=["dist"]), 9fb6117's wheel, the bench of e53370e):
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || exit 1
export PATH=/opt/torch/.venv/bin:$PATH; P=/tmp/joule-venv/bin/python
$P -c 'import joule.torch; joule.torch.native_comm_hook()'
K="built-in (twin);built-in hook;joule C++ (idle);joule C++ + edges;joule C++ + no-op edges"
$P -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/comm_hook_cost.py --blocks 12 --block 15 --rounds 3 --kinds "$K" > $OUT/comm_hook_cost-rounds.txt 2>&1
K2="plain;hooks + one node pre-hook;joule, phases"
for b in 128 256; do
  $P bench/probes/hook_parts.py --model resnet50 --depth 2 --batch $b --blocks 10 --block 5 --kinds "$K2" > $OUT/resnet50-batch$b-depth2.txt 2>&1
done
