#!/usr/bin/env bash
# The real-GPU measurements behind bench/README.md. READ-ONLY: nothing here
# changes a GPU setting (joule only reads NVML; the load only runs kernels).
# Usage: bench/run_gpu.sh CARRY_DIR OUT_DIR
#   CARRY_DIR holds bin/ (joule and the bench programs), lib/ (their shared
#   libraries) and fake/libnvidia-ml.so.1 (the fake driver, for side-by-side
#   runs); see bench/README.md for how it is assembled.
set -u
carry=$(cd "$1" && pwd)
out=$2
bin=$carry/bin
export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export JOULE_BENCH_FAKE_NVML=$carry/fake/libnvidia-ml.so.1
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,power.min_limit,power.max_limit \
  --format=csv | tee "$out/nvidia-smi.txt"
"$bin/joule" info | tee "$out/info.txt"

echo "== window cost and driver call costs" | tee "$out/monitor_bench.txt"
JOULE_BENCH_NVML=1 "$bin/joule_bench_monitor" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true 2>&1 | tee -a "$out/monitor_bench.txt"

echo "== sampler CPU cost" | tee "$out/sampler_cost.txt"
for args in "--backend sim --gpus 0 --hz 100" "--backend nvml --hz 100" "--backend nvml --hz 100 --all-fields" \
            "--backend fake --gpus 8 --hz 100" "--backend sim --gpus 8 --hz 100" "--backend nvml --hz 1000"; do
  "$bin/joule_bench_sampler_cost" $args --seconds 10 2>&1 | tee -a "$out/sampler_cost.txt"
done

# accuracy TITLE FILE LOAD_ARGS SHORT_WINDOWS: the accuracy tool beside a PyTorch load.
accuracy() {
  echo "== accuracy, $1" | tee "$out/$2"
  python3 bench/gpu_load.py $3 --seconds 170 &
  local load=$!
  sleep 8
  "$bin/joule_bench_accuracy" --backend nvml --warmup-s 35 --repeats 8 --short-windows "$4" 2>&1 | tee -a "$out/$2"
  kill $load 2>/dev/null
  wait $load 2>/dev/null
}
accuracy "steady load" accuracy_steady.txt "--mode steady" 60
# Short windows need steady power for their reference, so pulses get aligned windows only.
accuracy "fast pulses (0.35 s busy / 0.35 s idle)" accuracy_pulse.txt "--mode pulse" 0
accuracy "slow pulses (2 s busy / 2 s idle)" accuracy_slow_pulse.txt "--mode pulse --half-period-s 2" 0

echo "== joule measure of a real PyTorch job"
"$bin/joule" measure --json --interval-ms 10 --timeline "$out/timeline.csv" --sample util,clock,temp,mem \
  -- python3 bench/gpu_load.py --mode pulse --half-period-s 1 --seconds 8 > "$out/measure.json"
echo "exit status $?"
cat "$out/measure.json"
