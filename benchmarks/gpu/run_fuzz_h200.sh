#!/usr/bin/env bash
# One command on the H200 machine (issue 18): the differential fuzzer on cuda and, on the cores it leaves,
# on CPU, side by side; optionally the cuda test modules first. Everything lands in $OUT (default fuzz_out):
#   fuzz_env.txt                     machine and versions
#   cuda_tests.txt                   stax-frontend's cuda test modules (SKIP_TESTS=1 skips them)
#   fuzz-cuda.log / fuzz-cpu.log     the fuzzers' progress and summaries
#   fuzz.tgz                         both output directories (summary.json, failures.jsonl, reproducers)
# Knobs: CUDA_COUNT (default 1000), CUDA_SEED (5), CUDA_WORKERS (6), CPU_COUNT (default 0: no CPU run),
# CPU_SEED (7), CPU_WORKERS (8), FUZZ_S (seconds after which no new graph starts, default 420).
# CPU workers run single-threaded (OMP_NUM_THREADS=1): eight processes on eight cores.
# TESTS_ALONGSIDE=1 runs every cuda test instead (stax-gpu on cuda, the frontend's cuda modules, the real models
# -k cuda) on cores TEST_CORES (12-15) while the cuda fuzzer runs on CUDA_CORES (0-11): correctness only, nothing
# timed shares the GPU. Results in all_cuda_tests.txt / .xml.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-fuzz_out}
mkdir -p "$OUT"
PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd:):$PWD
export PYTHONPATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
FUZZ_S=${FUZZ_S:-420}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__, 'triton', triton.__version__)"
  nproc; g++ --version | head -n 1
  git rev-parse --short HEAD 2>/dev/null
} > "$OUT/fuzz_env.txt" 2>&1
cat "$OUT/fuzz_env.txt"

if [ "${TESTS_ALONGSIDE:-0}" = "1" ]; then
  SKIP_TESTS=1
  TX=""
  $PY -c "import xdist" 2>/dev/null && TX="$TX -n ${TEST_WORKERS:-4}"
  $PY -c "import pytest_timeout" 2>/dev/null && TX="$TX --timeout 300"
  ( STAX_TEST_DEVICE=cuda timeout "${TESTS_S:-$((FUZZ_S + 120))}" taskset -c "${TEST_CORES:-12-15}" $PY -m pytest \
      packages/stax-gpu/tests packages/stax-frontend/tests/test_cuda.py packages/stax-frontend/tests/test_cuda_attention.py \
      packages/stax-frontend/tests/test_gpu_routing.py packages/stax-frontend/tests/test_gpu_fuzz_regressions.py \
      packages/stax-frontend/tests/test_scatter_lowering.py packages/stax-frontend/tests/test_real_models.py::test_inference_cuda \
      packages/stax-frontend/tests/test_real_models.py::test_training_step_cuda \
      -o addopts="" -q -p no:cacheprovider -rfE --tb=short $TX --durations=15 \
      --junitxml="$OUT/all_cuda_tests.xml" > "$OUT/all_cuda_tests.txt" 2>&1
    echo "pytest exit code: $?" >> "$OUT/all_cuda_tests.txt" ) &
fi
if [ "${SKIP_TESTS:-0}" != "1" ]; then
  EXTRA=""
  $PY -c "import xdist" 2>/dev/null && EXTRA="-n 4"
  timeout 200 $PY -m pytest packages/stax-frontend/tests/test_cuda.py packages/stax-frontend/tests/test_cuda_attention.py \
    packages/stax-frontend/tests/test_gpu_routing.py packages/stax-frontend/tests/test_fuzz_regressions.py \
    -o addopts="" -q -p no:cacheprovider -rfE --tb=short $EXTRA > "$OUT/cuda_tests.txt" 2>&1
  echo "pytest exit code: $?" >> "$OUT/cuda_tests.txt"
  tail -n 15 "$OUT/cuda_tests.txt"
fi

FUZZ="-m stax.frontend.fuzz --time-limit $FUZZ_S --shrink-budget ${SHRINK_S:-20} --graph-timeout 120"
timeout $((FUZZ_S + 150)) taskset -c "${CUDA_CORES:-0-7}" $PY $FUZZ --device cuda --count "${CUDA_COUNT:-1000}" --seed "${CUDA_SEED:-5}" \
  --workers "${CUDA_WORKERS:-6}" --out "$OUT/fuzz-cuda" > "$OUT/fuzz-cuda.log" 2>&1 &
if [ "${CPU_COUNT:-0}" -gt 0 ]; then
  OMP_NUM_THREADS=1 timeout $((FUZZ_S + 150)) taskset -c 8-15 $PY $FUZZ --device cpu --count "$CPU_COUNT" \
    --seed "${CPU_SEED:-7}" --workers "${CPU_WORKERS:-8}" --out "$OUT/fuzz-cpu" > "$OUT/fuzz-cpu.log" 2>&1 &
fi
wait
[ -f "$OUT/all_cuda_tests.txt" ] && tail -n 40 "$OUT/all_cuda_tests.txt"
for f in "$OUT"/fuzz-*.log; do echo "== $f"; grep -v "^\[" "$f" | tail -n 30; done
tar czf "$OUT/fuzz.tgz" -C "$OUT" $(cd "$OUT" && ls -d fuzz-cuda fuzz-cpu 2>/dev/null)
echo "total wall ${SECONDS} s"
