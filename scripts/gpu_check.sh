#!/usr/bin/env bash
# GPU check: one command for a machine with an NVIDIA GPU, with or without network.
#
#  1. makes a virtual environment (.gpu-venv, --system-site-packages, so the machine's own
#     CuPy and CUDA wheels are used) and installs the project and whatever it lacks from
#     ./wheelhouse (scripts/prepare_wheelhouse.sh, run beforehand where there is network),
#     falling back to the package index only when the wheelhouse cannot satisfy it;
#  2. runs `cakegov run --headline` over every valid corpus schedule: its check shapes
#     and the workloads' headline shapes it accepts (gemm 4096^3 bf16; kmeans_assign
#     N=65536, K=1024, D=128); records are appended to corpus/measurements/<workload>.jsonl;
#  3. when compute-sanitizer exists (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin or an
#     nvidia-cuda-sanitizer-api wheel), runs `--tool racecheck` and `--tool synccheck` on
#     every valid schedule at its smallest check shape (python -m cakegov.gpu.sanitize:
#     two correctness launches, no timing); otherwise says it did not;
#  4. runs the GPU tests (pytest -m gpu) with what time is left;
#  5. prints the table last: schedule, shape, correct?, time, TFLOP/s, GB/s, fraction of
#     peak, baseline time, ratio; then the sanitizer verdicts.
#
# Environment: PYTHON (default python3), REPEAT (timed launches per shape, default 30),
# RUN_TIMEOUT / TEST_TIMEOUT / SANITIZE_TIMEOUT (seconds, defaults 90 / 120 / 60),
# SANITIZE_BUDGET (seconds for all sanitizer runs, default 150), BUDGET (seconds for the
# whole check, default 540, so the whole stays under 10 minutes: no step outlives it, runs
# that would start within 20 s of it are skipped and reported as such), WHEELHOUSE,
# CAKEGOV_GPU_VENV, GPU_CHECK_OUT (default $OUT when set: measurement files, the table and
# the sanitizer logs are copied there).
# Arguments: schedule files to run first, in the order given (the headline GEMM, say), so
# that a budget that runs out cuts the least important ones; the rest of corpus/valid
# follows unless ONLY_LISTED=1. The sanitizer takes the schedules in the same order.
# GPU_CHECK_OUT also receives everything in one archive, gpu_check.tar.gz (a device
# machine returns a handful of files).
# --budget SECONDS (before the schedule arguments) sets BUDGET. The work is ordered by value
# (python -m cakegov.gpu.plan): schedules never measured, then the FA3 bisection
# (scripts/gpu_fa3.sh, when present), then unrecorded headline shapes, then the rest; a
# (schedule, shape, engine version) row already in corpus/measurements/ is not run again,
# so the next GPU run continues where the last one stopped. Cut off (TERM, INT, or the
# budget), the check still prints its summary of what it did.
# Exit: 0 all correct and sanitizer-clean, 1 something wrong or failed, 3 no CUDA device
# (nothing measured).
set -uo pipefail
if [ "${1:-}" = "--budget" ]; then
    case "${2:-}" in ''|*[!0-9]*) echo "gpu_check: --budget needs a number of seconds" >&2; exit 2 ;; esac
    BUDGET=$2
    shift 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
PYTHON=${PYTHON:-python3}
VENV=${CAKEGOV_GPU_VENV:-$ROOT/.gpu-venv}
WHEELHOUSE=${WHEELHOUSE:-$ROOT/wheelhouse}
REPEAT=${REPEAT:-30}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-60}
SANITIZE_BUDGET=${SANITIZE_BUDGET:-150}
BUDGET=${BUDGET:-540}
DEADLINE=$(( $(date +%s) + BUDGET ))
COPY_TO=${GPU_CHECK_OUT:-${OUT:-}}
START=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
WORK=$(mktemp -d)
STATUS=$WORK/status.tsv
SANITIZE=$WORK/sanitizer.tsv
: > "$STATUS"
: > "$SANITIZE"
tests_rc=124  # until the GPU tests ran
export PYTHONUNBUFFERED=1

step() { printf '\n== %s\n' "$*"; }
cut_off() {  # TERM / INT (the device's own limit): the summary of what was done, then stop
    trap - TERM INT
    echo; echo "gpu_check: cut off; summarising what was measured"
    summary
    exit 124
}
trap cut_off TERM INT
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
    CAKEGOV=("$PY" -c 'import sys; from cakegov.launch import main; sys.argv[0] = "cakegov"; main()')
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

# ---- 2. every valid schedule ------------------------------------------------------------
step "cakegov run --headline over corpus/valid (repeat $REPEAT)"
mapfile -t ALL_VALID < <(find corpus/valid -name '*.cake' | LC_ALL=C sort)
SCHEDULES=()
for listed in "$@"; do
    [ -f "$listed" ] || die "no such schedule: $listed"
    SCHEDULES+=("$listed")
done
if [ "${ONLY_LISTED:-0}" != 1 ]; then
    for schedule in "${ALL_VALID[@]}"; do
        case " $* " in *" $schedule "*) ;; *) SCHEDULES+=("$schedule") ;; esac
    done
fi
FA3_SCRIPT=()
[ -x scripts/gpu_fa3.sh ] && FA3_SCRIPT=(--fa3 scripts/gpu_fa3.sh)
"$PY" -m cakegov.gpu.plan "${FA3_SCRIPT[@]}" "${SCHEDULES[@]}" > "$WORK/plan.tsv" \
    || die "could not plan the run (python -m cakegov.gpu.plan)"
echo "  plan: $(cut -f1 "$WORK/plan.tsv" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $2; sep=", "}')"
while IFS=$'\t' read -r tier target shapes; do
    if [ "$tier" = skip ]; then
        echo "-- $target: every shape already recorded at this engine version"
        continue
    fi
    left=$(( DEADLINE - $(date +%s) ))
    if [ "$left" -lt 20 ]; then
        echo "-- $target: skipped (time budget of ${BUDGET}s spent)"
        printf '%s\t%s\n' "$target" 124 >> "$STATUS"
        continue
    fi
    if [ "$tier" = fa3-bisect ]; then
        echo "-- $target ($tier)"
        BUDGET=$(( left < 180 ? left : 180 )) timeout "$(( left < 200 ? left : 200 ))" \
            "$target" > "$WORK/gpu_fa3.log" 2>&1
        echo "   exit $? (log: gpu_fa3.log)"
        continue
    fi
    args=()
    IFS=';' read -r -a wanted <<< "$shapes"
    for shape in "${wanted[@]}"; do [ -n "$shape" ] && args+=(--shape "$shape"); done
    echo "-- $target ($tier: ${#wanted[@]} shape(s) unrecorded)"
    timeout "$(( left < RUN_TIMEOUT ? left : RUN_TIMEOUT ))" \
        "${CAKEGOV[@]}" run "$target" --repeat "$REPEAT" "${args[@]}" < /dev/null
    printf '%s\t%s\n' "$target" "$?" >> "$STATUS"
done < "$WORK/plan.tsv"

# ---- 3. compute-sanitizer ----------------------------------------------------------------
find_sanitizer() {
    local c
    for c in "$(command -v compute-sanitizer 2>/dev/null)" \
             "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
             /usr/local/cuda/bin/compute-sanitizer \
             "$("$PY" -c 'import glob, os, sys
for p in sys.path:
    for hit in glob.glob(os.path.join(p, "nvidia", "*", "compute-sanitizer", "compute-sanitizer")) + glob.glob(os.path.join(p, "nvidia", "*", "bin", "compute-sanitizer")):
        print(hit); raise SystemExit' 2>/dev/null)"; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}
step "compute-sanitizer racecheck + synccheck + initcheck, smallest check shape per schedule"
SANITIZER=$(find_sanitizer)
if [ -z "$SANITIZER" ]; then
    echo "  compute-sanitizer not found: racecheck and synccheck were NOT run"
    printf '%s\t%s\t%s\n' "-" "-" "not run: compute-sanitizer not found" >> "$SANITIZE"
else
    echo "  $SANITIZER ($("$SANITIZER" --version 2>/dev/null | tail -1))"
    san_deadline=$(( $(date +%s) + SANITIZE_BUDGET ))
    for schedule in "${SCHEDULES[@]}"; do
        for tool in racecheck synccheck initcheck; do
            now=$(date +%s)
            left=$(( DEADLINE - now )); san_left=$(( san_deadline - now ))
            [ "$san_left" -lt "$left" ] && left=$san_left
            if [ "$left" -lt 15 ]; then
                printf '%s\t%s\t%s\n' "$schedule" "$tool" "not run: time budget spent" \
                    >> "$SANITIZE"
                continue
            fi
            log="$WORK/sanitize-$(basename "$schedule" .cake)-$tool.log"
            timeout "$(( left < SANITIZE_TIMEOUT ? left : SANITIZE_TIMEOUT ))" \
                "$SANITIZER" --tool "$tool" --error-exitcode 86 --print-limit 20 \
                "$PY" -m cakegov.gpu.sanitize "$schedule" > "$log" 2>&1
            rc=$?
            case $rc in
                0) verdict="clean" ;;
                86) verdict="HAZARDS reported (see $(basename "$log"))" ;;
                124|137) verdict="not finished: time limit" ;;
                3) verdict="not run: no CUDA device" ;;
                *) verdict="run failed (exit $rc, see $(basename "$log"))" ;;
            esac
            printf '%s\t%s\t%s\n' "$schedule" "$tool" "$verdict" >> "$SANITIZE"
            echo "  $tool $schedule: $verdict"
        done
    done
fi

# ---- 4. GPU tests ------------------------------------------------------------------------
step "GPU tests (pytest -m gpu)"
left=$(( DEADLINE - $(date +%s) ))
if [ "$left" -lt 20 ]; then
    echo "  skipped: time budget of ${BUDGET}s spent"
    tests_rc=124
    : > "$WORK/pytest-gpu.log"
else
    timeout "$(( left < TEST_TIMEOUT ? left : TEST_TIMEOUT ))" \
        "$PY" -m pytest -q -m gpu -p no:cacheprovider $(grep -l "mark.gpu" tests/test_*.py) \
        2>&1 | tee "$WORK/pytest-gpu.log"
    tests_rc=${PIPESTATUS[0]}
fi
echo "  pytest -m gpu exit status: $tests_rc"

# ---- 5. the table (also when cut off) ---------------------------------------------------
summary() {  # sets SUMMARY_RC
step "summary"
"$PY" -m cakegov.gpu.report --measurements corpus/measurements --since "$START" \
    --status "$STATUS" | tee "$WORK/table.txt"
report_rc=${PIPESTATUS[0]}
{ echo; echo "compute-sanitizer (smallest check shape, two launches):"
  awk -F'\t' '{ printf "  %-10s %-60s %s\n", $2, $1, $3 }' "$SANITIZE"; } | tee -a "$WORK/table.txt"
sanitize_bad=0
grep -q $'\t\(HAZARDS\|run failed\)' "$SANITIZE" && sanitize_bad=1

if [ -n "$COPY_TO" ] && [ -d "$COPY_TO" ] && [ -w "$COPY_TO" ]; then
    cp "$WORK/table.txt" "$COPY_TO"/ 2>/dev/null || true
    mkdir -p "$WORK/out/measurements"
    cp corpus/measurements/*.jsonl "$WORK/out/measurements/" 2>/dev/null || true
    cp "$WORK/table.txt" "$WORK/pytest-gpu.log" "$STATUS" "$SANITIZE" "$WORK"/sanitize-*.log \
        "$WORK/plan.tsv" "$WORK/gpu_fa3.log" \
        "$WORK/out/" 2>/dev/null || true
    tar -czf "$COPY_TO/gpu_check.tar.gz" -C "$WORK/out" . 2>/dev/null || true
fi
SUMMARY_RC=3  # every run said: no CUDA device
if cut -f2 "$STATUS" | grep -qvx 3; then
    SUMMARY_RC=1
    [ "$report_rc" -eq 0 ] && [ "$sanitize_bad" -eq 0 ] \
        && { [ "$tests_rc" -eq 0 ] || [ "$tests_rc" -eq 5 ]; } && SUMMARY_RC=0
fi
}

summary
exit "$SUMMARY_RC"
