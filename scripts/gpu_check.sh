#!/usr/bin/env bash
# GPU check: one command for a machine with an NVIDIA GPU, with or without network.
#
#  1. makes a virtual environment (.gpu-venv, --system-site-packages, so the machine's own
#     CuPy and CUDA wheels are used) and installs the project and whatever it lacks from
#     ./wheelhouse (scripts/prepare_wheelhouse.sh, run beforehand where there is network),
#     falling back to the package index only when the wheelhouse cannot satisfy it;
#  2. runs the GPU tests (pytest -m gpu);
#  3. runs `cakegov run` over every valid corpus schedule (records are appended to
#     corpus/measurements/<workload>.jsonl);
#  4. prints a short table last: schedule, shape, correct?, time, baseline time, ratio.
#
# Environment: PYTHON (default python3), REPEAT (timed launches per shape, default 30),
# RUN_TIMEOUT / TEST_TIMEOUT (seconds, defaults 90 / 180), BUDGET (seconds for the whole
# check, default 420, so the whole stays under 8 minutes: no run outlives it, runs that would
# start within 20 s of it are skipped), WHEELHOUSE, CAKEGOV_GPU_VENV,
# GPU_CHECK_OUT (default $OUT when set: measurement files and the table are copied there).
# Exit: 0 all correct, 1 something wrong or failed, 3 no CUDA device (nothing measured).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
PYTHON=${PYTHON:-python3}
VENV=${CAKEGOV_GPU_VENV:-$ROOT/.gpu-venv}
WHEELHOUSE=${WHEELHOUSE:-$ROOT/wheelhouse}
REPEAT=${REPEAT:-30}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
BUDGET=${BUDGET:-420}
DEADLINE=$(( $(date +%s) + BUDGET ))
COPY_TO=${GPU_CHECK_OUT:-${OUT:-}}
START=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
WORK=$(mktemp -d)
STATUS=$WORK/status.tsv
: > "$STATUS"
export PYTHONUNBUFFERED=1

step() { printf '\n== %s\n' "$*"; }
die() { echo "gpu_check: $*" >&2; exit 2; }

# ---- 1. environment ---------------------------------------------------------------------
step "environment ($("$PYTHON" --version 2>&1), venv $VENV)"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV" 2>/dev/null \
        || "$PYTHON" -m venv --system-site-packages --without-pip "$VENV" \
        || die "cannot create a virtual environment with $PYTHON"
fi
PY="$VENV/bin/python"
# A python that is itself a venv (the H200 image's python3 is one) lends only its *base*
# interpreter's packages through --system-site-packages; add its own site-packages too.
venv_site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PYTHON" -c 'import site, sys
if sys.prefix != sys.base_prefix:
    print("\n".join(site.getsitepackages()))' > "$venv_site/_cakegov_parent_site.pth"
"$PY" -m pip --version >/dev/null 2>&1 || die "no pip in $VENV or its parent environment"

pip_install() {  # wheelhouse first, offline; the index only if that fails
    local quiet=(--disable-pip-version-check --no-input -q)
    if compgen -G "$WHEELHOUSE/*.whl" >/dev/null \
        && "$PY" -m pip install "${quiet[@]}" --no-index --find-links "$WHEELHOUSE" "$@"; then
        return 0
    fi
    echo "  (wheelhouse could not satisfy: $*; trying the package index)"
    "$PY" -m pip install "${quiet[@]}" --retries 1 --timeout 15 "$@"
}

pip_install "setuptools>=68" wheel || echo "  warning: setuptools/wheel not installable"
if pip_install --no-build-isolation -e "$ROOT" && pip_install pytest hypothesis jsonschema; then
    echo "  installed cakegov and its dependencies into $VENV"
else
    die "could not install the project: run scripts/prepare_wheelhouse.sh where there is" \
        "network and carry ./wheelhouse along"
fi
if [ -x "$VENV/bin/cakegov" ]; then
    CAKEGOV=("$VENV/bin/cakegov")
else
    CAKEGOV=("$PY" -c 'import sys; from cakegov.cli import main; sys.argv[0] = "cakegov"; main()')
fi
"$PY" - <<'EOF'
from cakegov.gpu.device import NoDevice, probe

try:
    device = probe()
except NoDevice as exc:
    print(f"  no CUDA device: {exc}")
else:
    info = device.info
    print(f"  device: {info.name} (cc {info.compute_capability}, {info.sm_count} SMs, "
          f"L2 {info.l2_bytes / 2**20:.0f} MiB), driver {info.driver or '?'}, "
          f"CUDA driver API {info.cuda_driver_version}, cupy {info.cupy_version}")
    device.close()
EOF

# ---- 2. GPU tests -----------------------------------------------------------------------
step "GPU tests (pytest -m gpu)"
left=$(( DEADLINE - $(date +%s) ))
timeout "$(( left < TEST_TIMEOUT ? left : TEST_TIMEOUT ))" \
    "$PY" -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$WORK/pytest-gpu.log"
tests_rc=${PIPESTATUS[0]}
echo "  pytest -m gpu exit status: $tests_rc"

# ---- 3. every valid schedule ------------------------------------------------------------
step "cakegov run over corpus/valid (repeat $REPEAT)"
mapfile -t SCHEDULES < <(find corpus/valid -name '*.cake' | LC_ALL=C sort)
for schedule in "${SCHEDULES[@]}"; do
    left=$(( DEADLINE - $(date +%s) ))
    if [ "$left" -lt 20 ]; then
        echo "-- $schedule: skipped (time budget of ${BUDGET}s spent)"
        printf '%s\t%s\n' "$schedule" 124 >> "$STATUS"
        continue
    fi
    echo "-- $schedule"
    timeout "$(( left < RUN_TIMEOUT ? left : RUN_TIMEOUT ))" \
        "${CAKEGOV[@]}" run "$schedule" --repeat "$REPEAT"
    printf '%s\t%s\n' "$schedule" "$?" >> "$STATUS"
done

# ---- 4. the table -----------------------------------------------------------------------
step "summary"
"$PY" -m cakegov.gpu.report --measurements corpus/measurements --since "$START" \
    --status "$STATUS" | tee "$WORK/table.txt"
report_rc=${PIPESTATUS[0]}

if [ -n "$COPY_TO" ] && [ -d "$COPY_TO" ] && [ -w "$COPY_TO" ]; then
    cp corpus/measurements/*.jsonl "$WORK/table.txt" "$WORK/pytest-gpu.log" "$COPY_TO"/ \
        2>/dev/null || true
fi
if cut -f2 "$STATUS" | grep -qvx 3; then
    [ "$report_rc" -eq 0 ] && { [ "$tests_rc" -eq 0 ] || [ "$tests_rc" -eq 5 ]; } && exit 0
    exit 1
fi
exit 3  # every run said: no CUDA device
