#!/usr/bin/env bash
# Download, on a machine with network, the wheels scripts/gpu_check.sh needs on a GPU
# machine that has none: the project's runtime dependencies and the few test dependencies,
# for the GPU machine's Python (default 3.12, the H200 image's) on x86-64 Linux.
# CuPy and the CUDA wheels are expected on the GPU machine already; WITH_CUDA=1 adds
# the `nvrtc` extra, cuda-bindings and nvidia-cuda-nvrtc (large: mind a 64 MiB
# transfer limit).
#
#   scripts/prepare_wheelhouse.sh                 # -> ./wheelhouse (git-ignored)
#   PY_VERSION=3.11 WHEELHOUSE=/tmp/wh scripts/prepare_wheelhouse.sh
#
# The device tool carries it with the tree: run(..., carry=["wheelhouse"]).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DEST=${WHEELHOUSE:-$ROOT/wheelhouse}
PY_VERSION=${PY_VERSION:-3.12}
PYTHON=${PYTHON:-python3}
# Packages the GPU machine surely has (next to CuPy): left out to keep the wheelhouse small.
SKIP=${SKIP:-numpy}

mapfile -t REQS < <("$PYTHON" - "${WITH_CUDA:-0}" <<'EOF'
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted_dev = {"pytest", "hypothesis", "jsonschema"}
extras = project["optional-dependencies"]
dev = [r for r in extras["dev"]
       if r.split(">")[0].split("=")[0].split("<")[0].strip() in wanted_dev]
if sys.argv[1] == "1":
    dev += extras["nvrtc"]
for req in [*project["dependencies"], *dev, "setuptools>=77", "wheel"]:
    print(req)
EOF
)

mkdir -p "$DEST"
echo "downloading ${#REQS[@]} requirements (and their dependencies) for CPython $PY_VERSION into $DEST"
"$PYTHON" -m pip download --disable-pip-version-check --only-binary=:all: \
    --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 \
    -d "$DEST" "${REQS[@]}"

for name in $SKIP; do
    pattern=$(printf '%s' "$name" | tr '-' '_')
    rm -f "$DEST"/"$pattern"-*.whl
done

total=$(du -sm "$DEST" | cut -f1)
count=$(find "$DEST" -name '*.whl' | wc -l)
echo "wheelhouse: $count wheels, ${total} MiB in $DEST (skipped: ${SKIP:-nothing})"
if [ "$total" -gt 48 ]; then
    echo "warning: over 48 MiB; the device tool carries at most 64 MiB with the tree" >&2
fi
