#!/usr/bin/env bash
# Builds if needed, then runs foxhunt-train with the given arguments.
# Usage: scripts/run.sh info
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" >/dev/null
exec "$root/${BUILD_DIR:-build}/foxhunt-train" "$@"
