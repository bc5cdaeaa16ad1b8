# The first lease's command (run(kind="nvidia-h200-x2", carry=["dist"]), d74eaed's wheel, the bench of cf5c85f):
mkdir -p $OUT/r && bash bench/gpu_comm_hook.sh $OUT/r 2
P=/tmp/joule-venv/bin/python
for k in "hooks + one node pre-hook" "joule, phases"; do
  $P bench/probes/hook_parts.py --model resnet50 --depth 2 --profile "$k" --profile-steps 20 > "$OUT/r/resnet-profile-${k%%,*}.txt" 2>&1
done
# (its profiles compare the profiler's first plain pass, still warming up, with the hooked one: see the second lease)
