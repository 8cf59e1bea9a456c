# Sourced by fuzz/build.sh and fuzz/replay.sh: what both compile, written once.
#   fuzz_objects OUT_DIR COMPILER FLAGS...  compiles the parser's sources into OUT_DIR and sets
#                                           objs=(...) and includes=(...)
# The op headers' host parts need CUDA's headers and all_kernels.h, which cuda/meson.build
# generates at configure time from its module list: a Meson build under fuzz/build/meson is
# configured once for it (nothing is compiled there).
fuzz_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_gen="$fuzz_root/fuzz/build/meson"
[ -f "$fuzz_gen/cuda/all_kernels.h" ] || meson setup "$fuzz_gen" "$fuzz_root" >/dev/null
includes=(-DFMT_HEADER_ONLY -DTOML_HEADER_ONLY=1 -I"$fuzz_root/src" -I"$fuzz_root" -I"$fuzz_root/cuda"
          -I"${CUDA_HOME:-/usr/local/cuda}/include" -I"$fuzz_gen/cuda")
fuzz_objects() {
  local out="$1" cxx="$2"
  shift 2
  mkdir -p "$out"
  objs=()
  for s in config/schema.cpp config/toml_reader.cpp config/resolve.cpp config/memory_estimate.cpp \
           config/trainer_profiles.cpp util/regular_file.cpp util/json_string.cpp; do
    local o="$out/$(basename "${s%.cpp}").o"
    "$cxx" "$@" "${includes[@]}" -c "$fuzz_root/src/$s" -o "$o"
    objs+=("$o")
  done
}
