/// @file safetensors.hpp
/// @brief Checkpoint files in the safetensors format (docs/checkpoints.md): write atomically,
///        read with full validation (structure, foxhunt marker and version, xxh64 of the data).
///
/// Layout: u64 little-endian header length N; N bytes of compact JSON
/// `{"__metadata__":{...},"<name>":{"dtype":"F32","shape":[..],"data_offsets":[b,e]},...}`
/// padded with spaces to a multiple of 8; then the tensors, packed with no gaps, in the order
/// safetensors itself writes them (wider dtypes first, then by name), so every tensor is aligned
/// to its element size. Loads with Python's `safetensors.numpy.load_file`.
///
/// Errors: every problem throws CheckpointError (an fh::Error with exit code 2, like a usage
/// error: the user pointed us at a bad file) whose message starts with "checkpoint <path>: ".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "util/errors.hpp"
#include "util/xxh64.hpp"

namespace fh::io {

/// A checkpoint file that cannot be written, read or used. Exit code 2.
struct CheckpointError : Error {
    explicit CheckpointError(const std::string& m) : Error(ExitCode::usage, m) {}
};

enum class Dtype { F32, F64, I32, I64, U8, U64 };

/// "F32", "I64", ...
std::string_view dtype_name(Dtype d) noexcept;
std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
std::size_t dtype_size(Dtype d) noexcept;

template <class T>
constexpr Dtype dtype_of() {
    if constexpr (std::is_same_v<T, float>)
        return Dtype::F32;
    else if constexpr (std::is_same_v<T, double>)
        return Dtype::F64;
    else if constexpr (std::is_same_v<T, std::int32_t>)
        return Dtype::I32;
    else if constexpr (std::is_same_v<T, std::int64_t>)
        return Dtype::I64;
    else if constexpr (std::is_same_v<T, std::uint8_t>)
        return Dtype::U8;
    else if constexpr (std::is_same_v<T, std::uint64_t>)
        return Dtype::U64;
    else
        static_assert(sizeof(T) == 0, "no safetensors dtype for this type");
}

using Shape = std::vector<std::uint64_t>;
/// "[2, 3]"
std::string shape_string(const Shape& s);

/// Metadata keys the writer adds and the reader checks (reserved: set_metadata refuses them).
inline constexpr std::string_view kMetaFormat = "format";           ///< = kFormatMarker
inline constexpr std::string_view kMetaVersion = "format_version";  ///< = kFormatVersion, decimal
inline constexpr std::string_view kMetaChecksum = "data_xxh64";     ///< 16 lower-case hex digits
/// Version 2: XXH64 of the metadata and the tensor table (header_checksum_input), 16 hex digits.
inline constexpr std::string_view kMetaHeaderChecksum = "header_xxh64";
inline constexpr std::string_view kFormatMarker = "foxhunt-checkpoint";
/// The version this build writes. It reads 1 too (no header checksum: its metadata, the
/// embedded profile included, is not verified; a warning says so).
inline constexpr int kFormatVersion = 2;
/// Largest header accepted (the same limit as the safetensors library).
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

/// One tensor's entry of a header, as the header checksum covers it.
struct TableEntry {
    std::string name;
    Dtype dtype;
    Shape shape;
    std::uint64_t begin = 0, end = 0;
};

/// What header_xxh64 hashes: every metadata entry but header_xxh64 itself, in byte order of the
/// keys, as u64le(key length) key u64le(value length) value; then every tensor in data order as
/// u64le(name length) name u64le(dtype length) dtype u64le(rank) u64le(dim)... u64le(begin)
/// u64le(end). Everything that affects what a reader does is covered (docs/checkpoints.md has
/// the same in Python).
std::string header_checksum_input(const std::map<std::string, std::string>& metadata,
                                  const std::vector<TableEntry>& tensors);

/// Builds a checkpoint in memory and writes it atomically.
class TensorFileWriter {
public:
    /// Adds a tensor; copies `bytes`, whose size must be product(shape) * dtype_size(dtype).
    /// Names are non-empty, unique, and not "__metadata__". Throws CheckpointError.
    void add(const std::string& name, Dtype dtype, const Shape& shape, std::span<const std::byte> bytes);
    /// Same, without copying: `bytes` must stay alive and unchanged until write() returns
    /// (for large buffers such as the replay memory).
    void add_borrowed(const std::string& name, Dtype dtype, const Shape& shape, std::span<const std::byte> bytes);
    template <class T>
    void add(const std::string& name, const Shape& shape, std::span<const T> values) {
        add(name, dtype_of<T>(), shape, std::as_bytes(values));
    }
    /// A string in `__metadata__` (e.g. the resolved profile, normalisation statistics as JSON).
    /// The keys of the format itself (kMetaFormat, kMetaVersion, kMetaChecksum) are refused.
    void set_metadata(const std::string& key, const std::string& value);

    /// The complete file: header (with marker, version and checksum) then data.
    std::vector<std::byte> serialize() const;
    /// Writes the file atomically: `<path>.tmp-<pid>` in the same directory, fsync, rename over
    /// `path`, fsync the directory. On any failure the old file (if any) is untouched and the
    /// temporary is removed. Throws CheckpointError naming the path and the system error.
    void write(const std::string& path) const;

private:
    struct Entry {
        std::string name;
        Dtype dtype;
        Shape shape;
        std::shared_ptr<std::vector<std::byte>> owned;  // null when borrowed
        std::span<const std::byte> bytes;
    };
    void add_entry(Entry e);
    std::vector<const Entry*> ordered() const;
    /// The header's length (u64 little-endian) and the header, for the tensors in `order`.
    std::string head(const std::vector<const Entry*>& order) const;

    std::vector<Entry> entries_;
    std::map<std::string, std::string> metadata_;
};

/// A read-only view of one tensor inside a TensorFile (valid while the TensorFile lives).
struct TensorView {
    Dtype dtype;
    Shape shape;
    std::span<const std::byte> bytes;
};

struct ReadOptions {
    /// Require and check the foxhunt marker, version and data checksum. Off: any valid
    /// safetensors file (e.g. one written by Python) is accepted; the structure is still checked.
    bool require_checkpoint = true;
};

/// A validated safetensors file, memory-mapped read-only. Move-only.
class TensorFile {
public:
    /// Maps and validates `path`. Throws CheckpointError ("checkpoint <path>: <what is wrong>").
    static TensorFile read(const std::string& path, const ReadOptions& options = {});
    /// Validates bytes held in memory; `label` stands for the path in messages.
    static TensorFile from_bytes(std::vector<std::byte> bytes, const std::string& label,
                                 const ReadOptions& options = {});

    const std::string& path() const noexcept { return path_; }
    /// The foxhunt format version read (1 or 2); 0 when the file was read without
    /// require_checkpoint. A version-1 file's metadata is not covered by a checksum.
    int format_version() const noexcept { return format_version_; }
    /// The metadata value, or nullopt.
    std::optional<std::string> metadata(const std::string& key) const;
    const std::map<std::string, std::string>& all_metadata() const noexcept { return metadata_; }
    bool has(const std::string& name) const;
    /// Tensor names in data order.
    std::vector<std::string> names() const;
    /// Throws CheckpointError "missing tensor" when absent.
    TensorView tensor(const std::string& name) const;
    /// A copy of the tensor's elements; throws CheckpointError when it is missing, its dtype is
    /// not T's, or its shape is not `expected`.
    template <class T>
    std::vector<T> get(const std::string& name, const Shape& expected) const {
        const TensorView v = checked(name, dtype_of<T>(), expected);
        std::vector<T> out(v.bytes.size() / sizeof(T));
        if (!v.bytes.empty()) std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
        return out;
    }
    /// The tensor with its dtype and shape checked (as get(), without the copy).
    TensorView checked(const std::string& name, Dtype dtype, const Shape& expected) const;

private:
    TensorFile() = default;
    void validate(const ReadOptions& options);
    [[noreturn]] void fail(const std::string& what) const;

    struct Unmap {
        std::size_t size;  // no initializer: the enclosing class needs it default-constructible
        void operator()(void* mapping) const noexcept;
    };
    std::string path_;
    const std::byte* base_ = nullptr;  // the whole file
    std::size_t size_ = 0;
    std::unique_ptr<void, Unmap> mapping_;  // the file's mmap (read()); moving keeps it
    std::vector<std::byte> memory_;         // from_bytes storage; moving a vector keeps its buffer
    std::size_t data_begin_ = 0;            // 8 + N
    std::map<std::string, std::string> metadata_;
    std::map<std::string, TensorView> tensors_;
    std::vector<std::string> order_;
    int format_version_ = 0;
};

/// Streaming XXH64 (src/util/xxh64.hpp), equal to fh::data::xxh64 of the concatenated input.
using Xxh64Stream = util::Xxh64Stream;

}  // namespace fh::io
