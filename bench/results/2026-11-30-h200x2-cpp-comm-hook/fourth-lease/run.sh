# The fourth lease's command (run(kind="nvidia-h200-x2", carry=["dist"]), d3506a7's wheel and bench):
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv > $OUT/install.txt 2>&1 || exit 1
export PATH=/opt/torch/.venv/bin:$PATH; P=/tmp/joule-venv/bin/python
$P -c 'import joule.torch; joule.torch.native_comm_hook()'
K="built-in (twin);joule C++ (idle);joule C++ + edges;joule C++ + no-op edges"
$P -m torch.distributed.run --standalone --nproc-per-node 2 bench/probes/comm_hook_cost.py --blocks 12 --block 15 --rounds 3 --kinds "$K" > $OUT/comm_hook_cost-rounds.txt 2>&1
$P -m torch.distributed.run --standalone --nproc-per-node 2 bench/gpu_attribution_ddp.py --out-dir $OUT/ddp --depth 1 --seconds 15 \
  --response bench/results/2026-11-26-h200-attribution-proof/proof-response/result.json > $OUT/ddp.txt 2>&1
