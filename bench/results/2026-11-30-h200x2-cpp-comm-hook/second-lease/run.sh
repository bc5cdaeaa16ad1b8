# The second lease's command (run(kind="nvidia-h200-x2", carry=["dist"]), d74eaed's wheel, the bench of 1fdd117):
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || exit 1
export PATH=/opt/torch/.venv/bin:$PATH; P=/tmp/joule-venv/bin/python
$P -c 'import joule.torch; joule.torch.native_comm_hook()'
K="built-in (twin);built-in hook;joule C++ (idle);joule C++ + edges;joule Py + edges"
$P -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/comm_hook_cost.py --blocks 12 --block 15 --rounds 3 --kinds "$K" > $OUT/comm_hook_cost-rounds.txt 2>&1
for k in "hooks + one node pre-hook" "joule, phases"; do
  f="$OUT/resnet-profile-${k%%,*}.txt"; f="${f// /-}"
  $P bench/probes/hook_parts.py --model resnet50 --depth 2 --profile "$k" --profile-steps 20 > "$f" 2>&1
done
