#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The scaling study of issue 36 on a GPU machine, read-only (`joule sweep --no-control`: no power
# limit or clock is changed): writes the chosen variant's sweep files (bench/scaling/variants.py),
# runs them with `joule sweep`, then `joule analyze` and `joule report` on every store, into OUT_DIR.
#
#   scripts/build-dist.sh --python PYTHON     # here: dist/ (PYTHON of the GPU machine's version, e.g. pyenv's 3.12)
#   bash bench/scaling/run_scaling.sh --dist dist [options] OUT_DIR [-- joule sweep options]   # there, carry=["dist"]
#
#   --variant full|reduced|cpu   full: the issue's study; reduced: 2 repeats, half the steps;
#                                cpu: the local proof (bench/scaling/prove_on_cpu.sh). Default full.
#   --gpus auto|1,2,4,...        GPU counts of the grids; auto: 1, 2, 4, 8 up to the GPUs
#                                nvidia-smi lists (1,2,4 on a 4-GPU machine). Default auto.
#   --only NAME,...              sweeps to run, in this order (resnet50_weak, resnet50_strong,
#                                gpt_weak, gpt_strong); the default is all four.
#   --deadline-s S               no sweep runs past S seconds after the start, less 60 s kept for
#                                the analysis (default 520: a 10-minute command). A sweep stopped
#                                there is interrupted (SIGINT: its run is marked interrupted and
#                                redone on resume); the same command again resumes where it stopped.
#   --reserve-s S                seconds of --deadline-s kept for the analysis (default 60)
#   --no-preflight               skip the preflight: while OUT_DIR has no store yet, each model's
#                                command first runs 3 steps on up to 2 GPUs outside joule (~20 s a
#                                model), so a broken environment stops the study before 24 runs
#                                of a sweep fail one by one
#   --dist DIR                   install joule from DIR first as a user does (bench/gpu_install.sh
#                                DIR /tmp/joule-venv: the wheel, else the sdist built there) and
#                                run that joule (the way on GPU machines)
#   --carry DIR                  joule from DIR/bin with DIR/lib on LD_LIBRARY_PATH (a build's own
#                                program; the CPU test's). Without either: build/bin/joule
# Everything after `--` goes to every `joule sweep` (e.g. --backend sim --sim count=2).
# OUT_DIR keeps one variant on one GPU model (variant.txt, gpu_model.txt; another is refused): the
# files, stores (*.sqlite, resumed), logs, *_runs.csv, analyses (*_analysis.txt/.json), reports
# (*_report.html), energy per sample (*_per_sample.md) and summary.md. Exit status: 0 every sweep
# of the grid done; 3 some sweep stopped or not started by the deadline (run the same command
# again); 1 some sweep failed (failed runs are kept; see its log), or the preflight did; 2 a usage
# error, or a folder of another variant or GPU model.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
variant=full gpus=auto only=resnet50_weak,resnet50_strong,gpt_weak,gpt_strong deadline_s=520 carry='' dist=''
analysis_reserve_s=60 preflight=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --variant) variant=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --deadline-s) deadline_s=$2; shift 2 ;;
    --reserve-s) analysis_reserve_s=$2; shift 2 ;;
    --no-preflight) preflight=0; shift ;;
    --carry) carry=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    --) break ;;
    -*) echo "run_scaling.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 && $1 != -- ]] || { echo "usage: run_scaling.sh [options] OUT_DIR [-- joule sweep options]" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
[[ ${1:-} == -- ]] && shift
sweep_args=("$@")
start_s=$(date +%s)

# joule: installed from --dist (below, once the folder is accepted; its data inside the package),
# a --carry folder's, or this checkout's.
if [[ -n $dist ]]; then
  dist=$(cd "$dist" && pwd) || exit 2
  compgen -G "$dist/joule-*.tar.gz" > /dev/null || { echo "run_scaling.sh: no joule sdist in $dist" >&2; exit 2; }
  joule=/tmp/joule-venv/bin/joule
else
  if [[ -n $carry ]]; then
    carry=$(cd "$carry" && pwd)
    joule=$carry/bin/joule
    export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    joule=$PWD/build/bin/joule
  fi
  [[ -x $joule ]] || { echo "run_scaling.sh: no joule at $joule (build, or pass --dist DIR)" >&2; exit 2; }
  export JOULE_DATA_DIR=$PWD/data
fi
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on the lent machines (their KINDS.md: a program using it can take the
# host's GPUs out of service); set here too, whatever the image sets. The runs inherit them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [[ $gpus == auto ]]; then
  count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  gpus=
  for n in 1 2 4 8; do (( n <= count )) && gpus+=${gpus:+,}$n; done
  [[ -n $gpus ]] || { echo "run_scaling.sh: nvidia-smi lists no GPU; pass --gpus" >&2; exit 2; }
fi

# A folder keeps what its first command stamped: one variant with its GPU counts, and one GPU model
# (a request for one kind of machine can be answered with another). A store resumed under another
# would mix two studies in one configuration's repeats.
# refuse_other_stamp FILE VALUE WHAT_IT_HOLDS WHAT_THIS_HAS: exits 2 when FILE holds another value.
refuse_other_stamp() {
  [[ -f $out/$1 ]] || return 0
  local stamped
  stamped=$(cat "$out/$1")
  [[ $stamped == "$2" ]] && return 0
  echo "run_scaling.sh: $out holds $3$stamped, but $4 $2: use another folder" >&2
  exit 2
}
stamp="variant=$variant gpus=$gpus"
model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort -u | paste -sd, -)
model=${model:-none (no nvidia-smi)}
refuse_other_stamp variant.txt "$stamp" "" "this command asks for"
refuse_other_stamp gpu_model.txt "$model" "runs on " "this machine has"
# Installed as a user does (the wheel, else the sdist built here), each command anew.
if [[ -n $dist ]]; then
  bench/gpu_install.sh "$dist" /tmp/joule-venv 2>&1 | tee -a "$out/install.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || { echo "run_scaling.sh: installing joule from $dist failed" >&2; exit 2; }
fi
echo "$stamp" > "$out/variant.txt"
echo "$model" > "$out/gpu_model.txt"
python3 bench/scaling/variants.py write --variant "$variant" --gpus "$gpus" --only "$only" --out "$out" \
  | tee "$out/estimate.txt" || exit 2

# Appended, one block a command: a folder resumed on several machines of its model says which.
{
  echo "== $(date -u +"%Y-%m-%d %H:%M:%S UTC") on $(hostname)"
  nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv 2>&1 || echo "(no nvidia-smi)"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
  # Without torchvision, ddp_train.py builds the same ResNet-50 itself (said in each run's line).
  python3 -c "import torchvision; print('torchvision', torchvision.__version__)" 2>&1 | tail -1
  "$joule" --version 2>&1 | head -1
  env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort
} >> "$out/environment.txt"

status=0
declare -A outcome
IFS=, read -ra names <<< "$only"

# Preflight, before the first store exists: each model's command (its grid's first batch value,
# 3 steps) under torchrun on up to 2 GPUs, outside joule.
if (( preflight )) && ! compgen -G "$out/*.sqlite" > /dev/null; then
  declare -A checked
  most=$(tr , '\n' <<< "$gpus" | sort -n | tail -1)
  ranks=$(( most >= 2 ? 2 : 1 ))
  for name in "${names[@]}"; do
    toml=$out/$name.toml
    command=$(sed -n 's/^command = "\(.*\)"$/\1/p' "$toml")
    model=$(grep -o -- '--model [a-z0-9]*' <<< "$command")
    [[ -n ${checked[$model]:-} ]] && continue
    checked[$model]=1
    key=$(grep -o '{[a-z_]*}' <<< "$command" | head -1 | tr -d '{}')
    value=$(sed -n "s/^$key = \[\([0-9]*\).*/\1/p" "$toml")
    command=${command//\{$key\}/$value}
    command=$(sed -e 's/--steps [0-9]*/--steps 3/' -e 's/--warmup-steps [0-9]*/--warmup-steps 1/' <<< "$command")
    echo "== preflight ($model, $ranks ranks): $command" | tee -a "$out/preflight.log"
    # shellcheck disable=SC2086  # the command's words, as joule sweep splits them
    if ! CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(( ranks - 1 ))) timeout -k 10 240 \
         torchrun --nproc-per-node "$ranks" --no-python $command >> "$out/preflight.log" 2>&1; then
      tail -30 "$out/preflight.log"
      echo "run_scaling.sh: the preflight of $name failed (above; $out/preflight.log): no sweep was started" >&2
      exit 1
    fi
    grep '^ddp_train:' "$out/preflight.log" | tail -1
  done
fi
for name in "${names[@]}"; do
  left_s=$(( deadline_s - analysis_reserve_s - ($(date +%s) - start_s) ))
  if (( left_s < 15 )); then  # not even one run's start-up
    outcome[$name]="not started (deadline)"; (( status == 1 )) || status=3; continue
  fi
  echo "== $name: joule sweep (at most ${left_s} s in this command)" | tee -a "$out/$name.log"
  # SIGINT at the deadline: the sweep marks its run interrupted and exits 130; resumed next time.
  timeout -s INT -k 30 "$left_s" "$joule" sweep "$out/$name.toml" --no-control --store "$out/$name.sqlite" \
    "${sweep_args[@]}" 2>&1 | tee -a "$out/$name.log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) outcome[$name]="done" ;;
    124|130|137) outcome[$name]="stopped at the deadline (exit $rc): run again to resume"; (( status == 1 )) || status=3 ;;
    *) outcome[$name]="exit $rc (see $name.log)"; status=1 ;;
  esac
done

# Analysis and report of every store there is, finished or not.
for name in "${names[@]}"; do
  store=$out/$name.sqlite
  [[ -f $store ]] || continue
  "$joule" sweep "$out/$name.toml" --store "$store" --export-only --export "$out/${name}_runs.csv" "${sweep_args[@]}" \
    > /dev/null 2>> "$out/$name.log"
  python3 bench/scaling/per_sample.py "$out/${name}_runs.csv" > "$out/${name}_per_sample.md" 2>> "$out/$name.log"
  "$joule" analyze "$store" > "$out/${name}_analysis.txt" 2>&1
  "$joule" analyze "$store" --json > "$out/${name}_analysis.json" 2>> "$out/$name.log"
  "$joule" report "$store" -o "$out/${name}_report.html" \
    --title "Issue 36 scaling study: $name, variant $variant, GPUs $gpus" >> "$out/$name.log" 2>&1
done

{
  echo "# Scaling study: variant $variant, GPU counts $gpus"
  echo
  echo "$(date -u +"%Y-%m-%d %H:%M:%S UTC"); this command ran $(( $(date +%s) - start_s )) s."
  echo
  echo '```'
  cat "$out/estimate.txt"
  echo '```'
  echo
  for name in "${names[@]}"; do
    echo "## $name: ${outcome[$name]:-not run}"
    echo
    # The analysis' counts and its scaling sections (fits, per GPU count, kWh per GPU-hour, counts).
    if [[ -f $out/${name}_analysis.txt ]]; then
      echo '```'
      awk 'NR == 1 {print; next} /^(scaling with|energy with|per GPU count|energy per GPU-hour|throughput per)/ {on = 1}
           /^(energy-time Pareto|choice by eta|utilisation)/ {on = 0} on' "$out/${name}_analysis.txt"
      echo '```'
    fi
    # Energy per sample and per GPU-hour per configuration (per_sample.py, from the runs' CSV).
    [[ -s $out/${name}_per_sample.md ]] && { cat "$out/${name}_per_sample.md"; echo; }
    # ddp_train.py's own line per run: the training loop alone, start-up excluded.
    if grep -q '^ddp_train:' "$out/$name.log" 2>/dev/null; then
      echo '```'; grep '^ddp_train:' "$out/$name.log"; echo '```'
    fi
    echo
  done
} > "$out/summary.md"
cat "$out/summary.md"
exit $status
