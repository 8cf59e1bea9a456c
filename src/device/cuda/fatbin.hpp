/// @file fatbin.hpp
/// @brief A reader for nvcc fatbins and the cubins (ELF) inside them, no GPU needed: which
///        architectures a module holds, and each kernel's parameter layout as nvcc recorded it in
///        the `.nv.info.<kernel>` section. Used by `info` and by the cubin ABI test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fh::cuda {

/// One parameter as recorded by EIATTR_KPARAM_INFO.
struct CubinParam {
    unsigned ordinal;
    unsigned offset;  ///< bytes from the start of the parameter buffer
    unsigned size;    ///< bytes
};

struct CubinKernel {
    std::string name;
    std::vector<CubinParam> params;  ///< sorted by ordinal
    unsigned param_bytes = 0;        ///< total parameter buffer size (EIATTR_PARAM_CBANK)
};

struct FatbinEntry {
    enum class Kind { ptx, cubin, unknown } kind = Kind::unknown;
    unsigned arch = 0;  ///< e.g. 86 for sm_86
    bool compressed = false;
    std::span<const std::byte> payload;
};

/// Splits a fatbin into its entries. Throws std::runtime_error on a malformed image.
std::vector<FatbinEntry> parse_fatbin(std::span<const std::byte> image);

/// Lists the kernels (entry functions) of an uncompressed cubin with their parameter layouts.
/// Throws std::runtime_error on a malformed ELF.
std::vector<CubinKernel> parse_cubin_kernels(std::span<const std::byte> elf);

/// DT_NEEDED entries of a host ELF64 file (the shared libraries it links).
std::vector<std::string> elf_needed_libraries(std::span<const std::byte> elf);

}  // namespace fh::cuda
