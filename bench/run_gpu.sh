#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The real-GPU measurements behind bench/README.md. READ-ONLY: nothing here
# changes a GPU setting (joule only reads NVML; the load only runs kernels).
# Usage: bench/run_gpu.sh CARRY_DIR DIST_DIR OUT_DIR [PART...]
#   CARRY_DIR holds bin/ (the C++ bench programs), lib/ (their shared
#   libraries) and fake/libnvidia-ml.so.1 (the fake driver, for side-by-side
#   runs): `bench/carry.sh CARRY_DIR` assembles it from build/.
#   DIST_DIR holds what scripts/build-dist.sh made here: joule itself, which
#   the parts that run it (costs: joule info; measure) install first as a user
#   does (bench/gpu_install.sh DIST_DIR /tmp/joule-venv).
#   (device tool: carry=[".device-carry", "dist"])
#   PARTs (default: all, ~30 min; at most ~6 min each): costs random loads aligned aligned_pulse measure
set -u
carry=$(cd "$1" && pwd)
dist=$2
out=$3
shift 3
parts=${*:-costs random loads aligned aligned_pulse measure}
bin=$carry/bin
mkdir -p "$out"
joule=
if [[ " $parts " == *" costs "* || " $parts " == *" measure "* ]]; then
  bench/gpu_install.sh "$dist" /tmp/joule-venv 2>&1 | tee "$out/install.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || exit 1
  # The program the package carries (joule/bin/joule), not the venv's `joule` script, whose Python
  # start-up would add to what measure_vs_counter.py's counter brackets around joule.
  joule=$(/tmp/joule-venv/bin/python -c 'from joule._cli import program_path; print(program_path())') || exit 1
fi
export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export JOULE_BENCH_FAKE_NVML=$carry/fake/libnvidia-ml.so.1
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,power.min_limit,power.max_limit \
  --format=csv | tee "$out/nvidia-smi.txt"

# accuracy NAME LOAD_ARGS WARMUP_S SECONDS EXTRA: the accuracy tool beside a PyTorch load.
accuracy() {
  echo "== accuracy, $1 ($2)" | tee "$out/accuracy_$1.txt"
  python3 bench/gpu_load.py $2 --seconds $(($3 + $4 + 40)) &
  local load=$!
  sleep 5
  "$bin/joule_bench_accuracy" --backend nvml --warmup-s "$3" --seconds "$4" $5 --csv "$out/accuracy_$1.csv" 2>&1 |
    tee -a "$out/accuracy_$1.txt"
  kill $load 2>/dev/null
  wait $load 2>/dev/null
}

for part in $parts; do
  case $part in
    costs)
      "$joule" info | tee "$out/info.txt"
      echo "== window cost and driver call costs" | tee "$out/monitor_bench.txt"
      JOULE_BENCH_NVML=1 "$bin/joule_bench_monitor" --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true 2>&1 | tee -a "$out/monitor_bench.txt"
      echo "== sampler CPU cost" | tee "$out/sampler_cost.txt"
      for args in "--backend sim --gpus 0 --hz 10" "--backend nvml --hz 10" "--backend nvml --hz 10 --window" \
                  "--backend nvml --hz 10 --windows-per-s 2 --seconds 40" "--backend nvml --hz 10 --windows-per-s 1 --seconds 40" \
                  "--backend nvml --hz 10 --windows-per-s 0.5 --seconds 40" \
                  "--backend fake --gpus 8 --hz 10" "--backend fake --gpus 8 --hz 10 --window" \
                  "--backend nvml --hz 100 --window"; do
        "$bin/joule_bench_sampler_cost" --seconds 10 $args 2>&1 | tee -a "$out/sampler_cost.txt"
      done
      ;;
    random) accuracy random "--mode random --seed 1" 35 150 "--seed 1" ;;
    loads)
      accuracy steady "--mode steady" 35 50 "--seed 2 --short-windows 60"
      accuracy pulse "--mode pulse" 35 110 "--seed 3"
      accuracy slow_pulse "--mode pulse --half-period-s 2" 35 50 "--seed 4"
      ;;
    # Edges right after observed counter steps: the reference exact whatever the load does.
    aligned) accuracy random_aligned "--mode random --seed 6" 35 240 "--seed 6 --align" ;;
    aligned_pulse) accuracy pulse_aligned "--mode pulse" 35 200 "--seed 7 --align" ;;
    measure)
      echo "== joule measure of a whole command against the counter" | tee "$out/measure.txt"
      for mode in "--mode random --seed 5" "--mode steady"; do
        python3 bench/measure_vs_counter.py "$joule" -- python3 bench/gpu_load.py $mode --seconds 15 2>&1 |
          tee -a "$out/measure.txt"
      done
      ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
