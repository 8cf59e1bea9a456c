#!/usr/bin/env bash
# Replays the profile corpus through the fuzz harness built by g++ at -O0 without NDEBUG, with
# AddressSanitizer and UndefinedBehaviorSanitizer (the debug build type that toml++ 3.3.0's
# assertions would abort in):  fuzz/replay.sh [FILES_OR_DIRS...]  (default: fuzz/corpus/profile)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="$here/build/replay"
mkdir -p "$out"
CXX="${CXX:-g++}"
flags=(-std=c++20 -g -O0 -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -DFMT_HEADER_ONLY -DTOML_HEADER_ONLY=1 -I"$root/src" -I"$root" -I"$root/cuda" -I"${CUDA_HOME:-/usr/local/cuda}/include")
# The op headers' host parts include all_kernels.h, which cuda/meson.build generates at configure
# time from its module list: configure a Meson build once for it (nothing is compiled there).
gen="$root/fuzz/build/meson"
[ -f "$gen/cuda/all_kernels.h" ] || meson setup "$gen" "$root" >/dev/null
flags+=(-I"$gen/cuda")
objs=()
for s in config/schema.cpp config/toml_reader.cpp config/resolve.cpp config/memory_estimate.cpp config/trainer_profiles.cpp util/regular_file.cpp util/json_string.cpp; do
  o="$out/$(basename "${s%.cpp}").o"
  "$CXX" "${flags[@]}" -c "$root/src/$s" -o "$o"
  objs+=("$o")
done
"$CXX" "${flags[@]}" "$here/profile_fuzzer.cpp" "$here/replay_main.cpp" "${objs[@]}" -o "$out/replay"
if [ $# -eq 0 ]; then set -- "$here/corpus/profile"; fi
"$out/replay" "$@"
