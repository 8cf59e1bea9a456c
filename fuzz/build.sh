#!/usr/bin/env bash
# Builds the libFuzzer harness for the profile parser, outside the Meson build:
#   fuzz/build.sh                 -> fuzz/build/profile_fuzzer
#   fuzz/build/profile_fuzzer fuzz/corpus/profile -dict=fuzz/profile.dict -max_total_time=180
# Needs clang 14 and libclang-rt-14-dev (Debian 12). No NDEBUG: toml++'s asserts are compiled
# as in a debug build (our TOML_ASSERT no-op must hold there too).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="$here/build"
mkdir -p "$out"
CXX="${CXX:-clang++-14}"
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -DFMT_HEADER_ONLY -DTOML_HEADER_ONLY=1
       -I"$root/src" -I"$root" -I"$root/cuda" -I"${CUDA_HOME:-/usr/local/cuda}/include")
srcs=(config/schema.cpp config/toml_reader.cpp config/resolve.cpp config/memory_estimate.cpp config/trainer_profiles.cpp util/regular_file.cpp util/json_string.cpp)
# The op headers' host parts include all_kernels.h, which cuda/meson.build generates at configure
# time from its module list: configure a Meson build once for it (nothing is compiled there).
gen="$root/fuzz/build/meson"
[ -f "$gen/cuda/all_kernels.h" ] || meson setup "$gen" "$root" >/dev/null
flags+=(-I"$gen/cuda")
objs=()
for s in "${srcs[@]}"; do
  o="$out/$(basename "${s%.cpp}").o"
  "$CXX" "${flags[@]}" -c "$root/src/$s" -o "$o"
  objs+=("$o")
done
"$CXX" "${flags[@]}" "$here/profile_fuzzer.cpp" "${objs[@]}" -o "$out/profile_fuzzer"
echo "built $out/profile_fuzzer"
