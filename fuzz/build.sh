#!/usr/bin/env bash
# Builds the libFuzzer harness for the profile parser, outside the Meson build:
#   fuzz/build.sh                 -> fuzz/build/profile_fuzzer
#   fuzz/build/profile_fuzzer fuzz/corpus/profile -dict=fuzz/profile.dict -max_total_time=180
# Needs clang 14 and libclang-rt-14-dev (Debian 12). No NDEBUG: toml++'s asserts are compiled
# as in a debug build (our TOML_ASSERT no-op must hold there too).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
CXX="${CXX:-clang++-14}"
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
fuzz_objects "$here/build" "$CXX" "${flags[@]}"
"$CXX" "${flags[@]}" "${includes[@]}" "$here/profile_fuzzer.cpp" "${objs[@]}" -o "$here/build/profile_fuzzer"
echo "built $here/build/profile_fuzzer"
