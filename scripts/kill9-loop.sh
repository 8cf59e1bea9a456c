#!/usr/bin/env bash
# kill -9 loop (issue 16): trains dqn-smoketest on the CPU, kills it with SIGKILL at random moments
# N times (resuming it after each kill), checks after every kill that no file is corrupt under its
# final name and that no temporary of an earlier process survived a resume, then completes the
# run. Prints one report line. The test suite runs the same loop with 50 kills ([kill9]).
# Usage: scripts/kill9-loop.sh [KILLS] [SEED]     (defaults: 200 kills, seed 16)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR=${BUILD_DIR:-build}
"$root/scripts/setup.sh" >/dev/null 2>&1 || { echo "kill9-loop: the build failed (run scripts/setup.sh)"; exit 1; }
export FH_TRAIN_EXE="$root/$BUILD_DIR/foxhunt-train" FH_SOURCE_DIR="$root"
export FH_KILL9_COUNT="${1:-200}" FH_KILL9_SEED="${2:-16}"
out=$("$root/$BUILD_DIR/tests/foxhunt-tests" "[kill9]" 2>&1) || { echo "$out" | tail -40; exit 1; }
echo "$out" | grep "^kill -9 loop:"
