#!/usr/bin/env bash
# The formatting check CI runs (meson test 'format'): every C++ and CUDA source the repository
# tracks is as clang-format 14 formats it with .clang-format (clang-format --dry-run --Werror).
# Exit 0 formatted; 1 not (clang-format names each file and line); 77 skipped: no clang-format 14
# (the layout differs between major versions; scripts/test.sh installs it under CI=true).
# To format: clang-format -i FILE..., or `git clang-format` for the lines of a change.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
fmt=${CLANG_FORMAT:-clang-format}
if ! command -v "$fmt" >/dev/null 2>&1; then
    echo "check-format: SKIP: $fmt not found (Debian: apt-get install clang-format)"
    exit 77
fi
major=$("$fmt" --version | grep -oE 'version [0-9]+' | grep -oE '[0-9]+$')
if [ "$major" != "14" ]; then
    echo "check-format: SKIP: clang-format ${major:-?} found; the project's layout is clang-format 14's"
    exit 77
fi
pattern='\.(cpp|hpp|h|cu|cuh)$'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files | grep -E "$pattern")
else  # a source tree without git: the same folders
    mapfile -t files < <(find src cuda tests fuzz bench -type f | grep -E "$pattern" | sort)
fi
if "$fmt" --dry-run --Werror "${files[@]}"; then
    echo "check-format: ${#files[@]} files formatted"
    exit 0
fi
echo "check-format: FAIL: run clang-format -i on the files above" >&2
exit 1
