#!/usr/bin/env bash
# Replays the profile corpus through the fuzz harness built by g++ at -O0 without NDEBUG, with
# AddressSanitizer and UndefinedBehaviorSanitizer (the debug build type that toml++ 3.3.0's
# assertions would abort in):  fuzz/replay.sh [FILES_OR_DIRS...]  (default: fuzz/corpus/profile)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
CXX="${CXX:-g++}"
flags=(-std=c++20 -g -O0 -fsanitize=address,undefined -fno-sanitize-recover=undefined)
out="$here/build/replay"
fuzz_objects "$out" "$CXX" "${flags[@]}"
"$CXX" "${flags[@]}" "${includes[@]}" "$here/profile_fuzzer.cpp" "$here/replay_main.cpp" "${objs[@]}" -o "$out/replay"
if [ $# -eq 0 ]; then set -- "$here/corpus/profile"; fi
"$out/replay" "$@"
