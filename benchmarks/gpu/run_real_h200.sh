#!/usr/bin/env bash
# One command on the H200 (issue 19): the cuda real-model tests, then the real suite on cuda — inference and a
# training step, float32 and bfloat16 — stax vs Inductor vs eager, interleaved in one process per run.
# Everything lands in $OUT (default benchmarks/results):
#   real_env.txt                     machine, versions, which torchvision timm gets (the real one there: no shim)
#   real_tests.txt / real_tests.xml  packages/stax-frontend/tests/test_real_models.py -k cuda (~85 s with xdist)
#   real-cuda[-bfloat16][-train][-$REAL_TAG].{json,md,png} and real-cuda-<run>.log   one per run; the JSON and
#                                    markdown are rewritten after every model, so a run cut short keeps its rows
# Bounded to ~8 minutes: tests <= 110 s, then the runs share what is left of $BUDGET_S (default 480); each run
# starts no model after its share (--deadline: the rest are reported as skipped) and is killed at share + 60 s.
# Cost per model and run, measured on the H200 (cold compiles dominate): inference ~15-25 s, a training step
# ~60-70 s, so one 8-minute call covers the inference runs of the whole suite but not the training runs. The whole
# suite in four calls of <= 8 min each:
#   REAL_RUNS="infer-fp32 infer-bf16" bash benchmarks/gpu/run_real_h200.sh
#   SKIP_TESTS=1 BUDGET_S=540 REAL_RUNS="train-fp32 train-bf16" REAL_ONLY=resnet18,resnet50,mobilenet REAL_TAG=a ...
#   SKIP_TESTS=1 BUDGET_S=540 REAL_RUNS="train-fp32 train-bf16" REAL_ONLY=convnext,vit,bert REAL_TAG=b ...
#   SKIP_TESTS=1 BUDGET_S=540 REAL_RUNS="train-fp32 train-bf16" REAL_ONLY=gpt2,t5,llama,transformer REAL_TAG=c ...
# Done (2026-12-03): every model and phase, merged per run into real-cuda[-bfloat16][-train].{json,md,png} by
# `python -m benchmarks.harness.merge_real OUT_STEM OUT_STEM.json PART.json ...` (later parts win per model, a merged
# report merges again; the header names each part's commit). To refresh some rows, run them with REAL_ONLY and a
# REAL_TAG and merge the part into the committed table. benchmarks/gpu/run_kernel_probe_h200.sh runs the per-kernel
# probe (kernel_probe.py) beside the cuda tests and, optionally, rows of this suite in the same call.
# Each invocation spends ~25 s on real_env.txt (imports) before the first model: a BUDGET_S under ~60 runs nothing.
# Knobs: REAL_RUNS (which runs, in order: infer-fp32 train-fp32 infer-bf16 train-bf16 autocast), REAL_ONLY (model
# name prefixes), REAL_TAG (suffix of the output names, for calls split by model), REAL_ROUNDS (interleaved
# rounds, default 10), BUDGET_S, SKIP_TESTS=1, DEADLINE_TAIL_S (a run starts no model in its last TAIL_S seconds,
# default 45: one training row; ~25 is enough for inference rows).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd:):$PWD
export PYTHONPATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-480}
ROUNDS=${REAL_ROUNDS:-10}
TAIL_S=${DEADLINE_TAIL_S:-45}
RUNS=${REAL_RUNS:-"infer-fp32 train-fp32 infer-bf16 train-bf16"}
ONLY=${REAL_ONLY:+--only $REAL_ONLY}
TAG=${REAL_TAG:+-$REAL_TAG}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  $PY -c "import timm, transformers; print('timm', timm.__version__, 'transformers', transformers.__version__)"
  $PY -c "from benchmarks.workloads import real_models as R; R.ensure_timm(); print('timm imports with', R.torchvision_status())"
  git rev-parse --short HEAD 2>/dev/null
} > "$OUT/real_env.txt" 2>&1
cat "$OUT/real_env.txt"

# 1. the real models on cuda through stax.gpu, against eager (the CPU half of the file runs in tox)
if [ "${SKIP_TESTS:-0}" != "1" ]; then
EXTRA=""
$PY -c "import xdist" 2>/dev/null && EXTRA="$EXTRA -n 8"
$PY -c "import pytest_timeout" 2>/dev/null && EXTRA="$EXTRA --timeout 100"
timeout 110 $PY -m pytest packages/stax-frontend/tests/test_real_models.py -k cuda -o addopts="" -q \
  -p no:cacheprovider -rfE --tb=short --durations=10 $EXTRA --junitxml="$OUT/real_tests.xml" > "$OUT/real_tests.txt" 2>&1
echo "pytest exit code: $?" >> "$OUT/real_tests.txt"
tail -n 25 "$OUT/real_tests.txt"
fi

# 2. the suite: each run gets an equal share of the time left
set -- $RUNS
left=$#
for run in "$@"; do
  case $run in
    infer-fp32) args="" name=real-cuda ;;
    train-fp32) args="--train" name=real-cuda-train ;;
    infer-bf16) args="--dtype bfloat16" name=real-cuda-bfloat16 ;;
    train-bf16) args="--dtype bfloat16 --train" name=real-cuda-bfloat16-train ;;
    autocast) args="--autocast" name=real-cuda-autocast ;;
    *) echo "unknown run $run (infer-fp32 train-fp32 infer-bf16 train-bf16 autocast)"; left=$((left - 1)); continue ;;
  esac
  remaining=$((BUDGET_S - SECONDS))
  share=$((remaining / left))
  left=$((left - 1))
  if [ "$share" -lt 30 ]; then echo "$run: no time left (${remaining} s)"; continue; fi
  log="$OUT/real-cuda-$run$TAG.log"
  echo "== $run: share ${share} s =="
  timeout $((share + 60)) $PY -m benchmarks --suite real --device cuda $args $ONLY --rounds "$ROUNDS" \
    --deadline $((share > 2 * TAIL_S ? share - TAIL_S : share / 2)) --out "$OUT" --name "$name$TAG" > "$log" 2>&1
  echo "$run exit code: $?" >> "$log"
  grep -E "^\| |^- \*\*|stax time|exit code|Error|error" "$log" | head -n 40
done
echo "total wall ${SECONDS} s"
