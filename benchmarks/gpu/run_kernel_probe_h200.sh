#!/usr/bin/env bash
# One H200 call (issue 20): the per-kernel probe of real models (kernel_probe.py) while the cuda real-model
# tests run beside it (they compile on the host's cores; the probe takes each kernel's median launch, so
# their GPU bursts move few rows), then optionally suite rows through run_real_h200.sh.
# Everything is packed into $OUT/probe.tar.gz (the device tool brings back at most 8 files); the text
# summaries are also copied to $OUT.
#   PROBE_MODELS=resnet18,vit,bert PROBE_ARGS="--train" PROBE_S=300 [PROBE2_MODELS=... PROBE2_ARGS=... PROBE2_S=...] \
#   SUITE="REAL_RUNS=... REAL_ONLY=..." \
#     bash benchmarks/gpu/run_kernel_probe_h200.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/probe_out}
W=$(mktemp -d)
PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd:):$PWD
export PYTHONPATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}
git rev-parse --short HEAD > "$W/commit.txt" 2>/dev/null
if [ "${SKIP_TESTS:-0}" != "1" ]; then
  ( timeout "${TESTS_S:-200}" $PY -m pytest packages/stax-frontend/tests/test_real_models.py -k cuda -o addopts="" -q \
      -p no:cacheprovider -rfE --tb=short --durations=10 -n 6 > "$W/real_tests.txt" 2>&1
    echo "pytest exit code: $?" >> "$W/real_tests.txt" ) &
fi
probe() {  # probe LOG MODELS ARGS SECONDS: one kernel_probe.py run, its log in $W
  timeout $(($4 + 90)) $PY benchmarks/gpu/kernel_probe.py --models "$2" $3 --deadline "$4" --out "$W" 2>&1 \
    | grep -vE "^(USDT|W[0-9]{4})" > "$W/$1"
  echo "probe exit code: ${PIPESTATUS[0]}" >> "$W/$1"
  tail -n 5 "$W/$1"
}
[ -n "${PROBE_MODELS:-}" ] && probe probe.log "$PROBE_MODELS" "${PROBE_ARGS:-}" "${PROBE_S:-300}"
# a second probe, e.g. other models with other backends
[ -n "${PROBE2_MODELS:-}" ] && probe probe2.log "$PROBE2_MODELS" "${PROBE2_ARGS:-}" "${PROBE2_S:-200}"
wait
tail -n 15 "$W/real_tests.txt" 2>/dev/null
if [ -n "${SUITE:-}" ]; then
  env $SUITE SKIP_TESTS=1 OUT="$W" bash benchmarks/gpu/run_real_h200.sh > "$W/suite.log" 2>&1
  tail -n 30 "$W/suite.log"
fi
tar czf "$OUT/probe.tar.gz" -C "$W" .
cp "$W"/kernels-*.txt "$OUT"/ 2>/dev/null
cp "$W/real_tests.txt" "$OUT"/ 2>/dev/null
ls -la "$W" "$OUT"
