#!/usr/bin/env bash
# Builds if needed, runs the test suites (meson test) and ends with "N passed, N failed",
# counted in Catch2 test cases. Extra arguments go to meson test (e.g. --suite, a test name).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
BUILD_DIR=${BUILD_DIR:-build}
"$root/scripts/setup.sh" || { echo "0 passed, 1 failed"; exit 1; }
# CI=true: the report and sweep tests render their HTML with headless Chromium and fail without it
# (elsewhere they skip the rendering with a notice), so CI installs the Debian package.
# CI=true: the formatting check (meson test 'format') needs clang-format 14 (Debian 12's package).
if [ "${CI:-}" = "true" ] && ! command -v clang-format >/dev/null 2>&1; then
    echo "test: CI=true: installing clang-format for the formatting check" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-format >/dev/null; } ||
        echo "test: could not install clang-format: the formatting check will be skipped" >&2
fi
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1; then
    echo "test: CI=true: installing chromium for the rendering checks" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } ||
        echo "test: could not install chromium: the rendering checks will fail" >&2
fi
meson test -C "$BUILD_DIR" --print-errorlogs "$@"
status=$?
python3 "$root/scripts/test_summary.py" "$BUILD_DIR/meson-logs/testlog.json"
summary_status=$?
[ $status -eq 0 ] && [ $summary_status -eq 0 ]
