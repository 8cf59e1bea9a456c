#!/usr/bin/env bash
# Builds the executable if needed (foxhunt-train alone: scripts/test.sh builds the test suite when
# it runs the tests), then runs foxhunt-train with the given arguments.
# Usage: scripts/run.sh --profile dqn-smoketest   (environment: BUILD_DIR, as scripts/setup.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=${BUILD_DIR:-build}
[[ "$build" == /* ]] || build="$root/$build"
[ -x "$build/foxhunt-train" ] ||
    echo "run.sh: building foxhunt-train (the executable only, not the tests: the first build takes minutes)" >&2
"$root/scripts/setup.sh" --target foxhunt-train >/dev/null
exec "$build/foxhunt-train" "$@"
