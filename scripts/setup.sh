#!/usr/bin/env bash
# Installs the Debian packages foxhunt-train needs (idempotent), configures and builds.
# Usage: scripts/setup.sh [--target T]... [meson options...]   e.g. scripts/setup.sh -Dgpu_archs=86
#   --target T   build only ninja target T and what it needs (e.g. foxhunt-train: the executable
#                without the test suite, as scripts/run.sh does); default: everything, tests included
# Environment: BUILD_DIR (default: build), TOOLKIT_DIR (default: /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TOOLKIT_DIR=${TOOLKIT_DIR:-/usr/local/cuda}
targets=()
while [ $# -gt 0 ] && [ "$1" = --target ]; do
    [ $# -ge 2 ] || { echo "setup: --target takes a ninja target (e.g. foxhunt-train)" >&2; exit 2; }
    targets+=("$2")
    shift 2
done

# parallel: scripts/sweep.sh runs its jobs with GNU parallel when installed (the [sweep] tests
# then exercise it; without it the script uses its own job pool).
packages=(meson ninja-build g++ pkg-config python3 libcli11-dev libtomlplusplus-dev
          libspdlog-dev libfmt-dev catch2 parallel)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$TOOLKIT_DIR/bin/nvcc" ]; then
    echo "setup: the CUDA 13 toolkit is required at $TOOLKIT_DIR (nvcc, cudart_static, cuBLAS);" \
         "set TOOLKIT_DIR if it lives elsewhere" >&2
    exit 1
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    meson setup "$BUILD_DIR" -Dtoolkit_dir="$TOOLKIT_DIR" "$@" >/dev/null
elif [ $# -gt 0 ]; then
    meson configure "$BUILD_DIR" "$@" >/dev/null
fi
ninja -C "$BUILD_DIR" "${targets[@]}" >&2
