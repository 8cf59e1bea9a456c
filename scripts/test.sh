#!/usr/bin/env bash
# Builds if needed, runs the test suites (meson test) and ends with "N passed, N failed",
# counted in Catch2 test cases. Extra arguments go to meson test (e.g. --suite, a test name).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
BUILD_DIR=${BUILD_DIR:-build}
"$root/scripts/setup.sh" || { echo "0 passed, 1 failed"; exit 1; }
meson test -C "$BUILD_DIR" --print-errorlogs "$@"
status=$?
python3 "$root/scripts/test_summary.py" "$BUILD_DIR/meson-logs/testlog.json"
summary_status=$?
[ $status -eq 0 ] && [ $summary_status -eq 0 ]
