#!/usr/bin/env bash
# The FA3 bisection (issue 36, axiom A19): runs the three FlashAttention-3 transcriptions
# with two math warpgroups as four kernels each (python -m cakegov.gpu.fa3: `lowered` with
# the proxy fence before every K/V release, `unfenced`, `synced`, `other-leads`) at the
# shapes they failed at on the H200, 20 launches each with fresh inputs, and prints the
# error of each math warpgroup's rows per launch set, the device and the NVRTC version.
# Records are appended to corpus/measurements/fa3_bisect.jsonl (and copied to $OUT).
#
# Environment: BUDGET (seconds, default 180), REPEAT (default 20), PYTHON (default: the
# gpu_check virtual environment's python when it exists, else python3).
# Exit: as python -m cakegov.gpu.fa3 (0 ran, 2 usage, 3 no device or compiler), 124 when
# the budget ran out.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
VENV=${CAKEGOV_GPU_VENV:-$ROOT/.gpu-venv}
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$VENV/bin/python" ]; then PYTHON=$VENV/bin/python; else PYTHON=python3; fi
fi
BUDGET=${BUDGET:-180}
REPEAT=${REPEAT:-20}
export PYTHONUNBUFFERED=1
echo "== fa3 bisection (budget ${BUDGET}s, repeat $REPEAT, $("$PYTHON" --version 2>&1))"
"$PYTHON" - <<'PY' || true
try:
    from cuda.bindings import nvrtc
    err, major, minor = nvrtc.nvrtcVersion()
    print(f"  NVRTC {major}.{minor}")
except Exception as exc:  # nvcc is used then; cakegov.gpu.fa3 prints the compiler
    print(f"  NVRTC not importable ({type(exc).__name__})")
PY
timeout "$BUDGET" "$PYTHON" -m cakegov.gpu.fa3 --repeat "$REPEAT" "$@" \
    | tee "${TMPDIR:-/tmp}/gpu_fa3.txt"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && [ -w "${OUT:-}" ]; then
    cp "${TMPDIR:-/tmp}/gpu_fa3.txt" "$OUT/gpu_fa3.txt" 2>/dev/null || true
    cp corpus/measurements/fa3_bisect.jsonl "$OUT/" 2>/dev/null || true
fi
exit "$rc"
