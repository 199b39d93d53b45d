#!/usr/bin/env bash
# One command on the H200 (issue 8): the stax-gpu tests on cuda, then the GPU benchmark.
# Everything lands in $OUT (default benchmarks/results): gpu_env.txt, gpu_tests.txt,
# gpu_tests.xml, gpu_bench.json, gpu_bench.md, gpu_bench.log, gpu_stax_sources.txt.
# Bounded: tests <= 150 s, benchmark <= 420 s (it stops starting workloads at 380 s and
# writes its JSON/markdown after every workload), so the whole run fits in 10 minutes.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd:)
export PYTHONPATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  $PY -c "import xdist, pytest_timeout; print('pytest-xdist and pytest-timeout present')"
} > "$OUT/gpu_env.txt" 2>&1
cat "$OUT/gpu_env.txt"

# 1. the stax-gpu tests and the frontend's cuda tests on the GPU (CI runs them under TRITON_INTERPRET)
EXTRA=""
$PY -c "import xdist" 2>/dev/null && EXTRA="$EXTRA -n 8"
$PY -c "import pytest_timeout" 2>/dev/null && EXTRA="$EXTRA --timeout 90"
STAX_TEST_DEVICE=cuda timeout 150 $PY -m pytest packages/stax-gpu/tests packages/stax-frontend/tests/test_cuda.py \
  packages/stax-frontend/tests/test_gpu_routing.py packages/stax-frontend/tests/test_scatter_lowering.py \
  -o addopts="" -q -p no:cacheprovider -rfE --tb=short $EXTRA \
  --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.txt" 2>&1
echo "pytest exit code: $?" >> "$OUT/gpu_tests.txt"
tail -n 30 "$OUT/gpu_tests.txt"

# 2. the benchmark: stax vs inductor vs eager, 16384x4096 fp32, interleaved medians, 21 rounds x 5 allocation
# states (~165 s); STAX_BENCH_VARIANTS (e.g. "operand_order=0,write_order=0@transpose+add") adds A/B rows
timeout 420 $PY benchmarks/gpu/bench_gpu.py --out "$OUT" --deadline 380 --rounds 21 --placements 5 \
  ${STAX_BENCH_VARIANTS:+--variants "$STAX_BENCH_VARIANTS"} \
  > "$OUT/gpu_bench.log" 2>&1
echo "bench exit code: $?" >> "$OUT/gpu_bench.log"
tail -n 40 "$OUT/gpu_bench.log"
