/// @file safetensors.cpp
#include "io/safetensors.hpp"

#include "io/atomic_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "data/fxcache.hpp"
#include "io/json.hpp"
#include "util/regular_file.hpp"

namespace fh::io {

namespace {

// Each dtype's name, element size and place in the write order, in the enum's order (facts()).
// safetensors writes wider dtypes first (its Dtype enum order, descending): U64, I64, F64,
// F32, I32, U8; then by name. Keeping that order makes our files byte-identical to Python's
// for the same tensors and metadata, and aligns every tensor to its element size.
struct DtypeFacts {
    Dtype dtype;
    std::string_view name;
    std::size_t size;
    int write_rank;
};
constexpr DtypeFacts kDtypes[] = {{Dtype::F32, "F32", 4, 3}, {Dtype::F64, "F64", 8, 2}, {Dtype::I32, "I32", 4, 4},
                                  {Dtype::I64, "I64", 8, 1}, {Dtype::U8, "U8", 1, 5},   {Dtype::U64, "U64", 8, 0}};
static_assert([] {
    for (std::size_t i = 0; i < std::size(kDtypes); ++i)
        if (kDtypes[i].dtype != static_cast<Dtype>(i)) return false;
    return true;
}());

/// d's facts; null for a value outside the enum.
const DtypeFacts* facts(Dtype d) noexcept {
    const auto i = static_cast<std::size_t>(d);
    return i < std::size(kDtypes) ? &kDtypes[i] : nullptr;
}

int write_rank(Dtype d) {
    const DtypeFacts* f = facts(d);
    return f != nullptr ? f->write_rank : static_cast<int>(std::size(kDtypes));
}

void put_u64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
void put_text(std::string& out, std::string_view s) {
    put_u64(out, s.size());
    out.append(s);
}

// Bytes of a `dtype` tensor of `shape`, or nullopt on overflow.
std::optional<std::uint64_t> byte_count(const Shape& shape, Dtype dtype) {
    std::uint64_t n = 1;
    for (const std::uint64_t d : shape)
        if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
    if (__builtin_mul_overflow(n, dtype_size(dtype), &n)) return std::nullopt;
    return n;
}

std::string hex16(std::uint64_t v) {
    return fmt::format("{:016x}", v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// dtypes

std::string_view dtype_name(Dtype d) noexcept {
    const DtypeFacts* f = facts(d);
    return f != nullptr ? f->name : "?";
}

std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
    for (const DtypeFacts& f : kDtypes)
        if (f.name == name) return f.dtype;
    return std::nullopt;
}

std::size_t dtype_size(Dtype d) noexcept {
    const DtypeFacts* f = facts(d);
    return f != nullptr ? f->size : 0;
}

std::string shape_string(const Shape& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
}

std::string header_checksum_input(const std::map<std::string, std::string>& metadata,
                                  const std::vector<TableEntry>& tensors) {
    std::string out;
    for (const auto& [k, v] : metadata) {  // std::map: keys in byte order
        if (k == kMetaHeaderChecksum) continue;
        put_text(out, k);
        put_text(out, v);
    }
    for (const auto& t : tensors) {
        put_text(out, t.name);
        put_text(out, dtype_name(t.dtype));
        put_u64(out, t.shape.size());
        for (const auto d : t.shape) put_u64(out, d);
        put_u64(out, t.begin);
        put_u64(out, t.end);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// TensorFileWriter

void TensorFileWriter::add_entry(Entry e) {
    if (e.name.empty()) throw CheckpointError("checkpoint tensor: empty tensor name");
    if (e.name == "__metadata__")
        throw CheckpointError("checkpoint tensor: the name __metadata__ is reserved by safetensors");
    for (const auto& x : entries_)
        if (x.name == e.name) throw CheckpointError(fmt::format("checkpoint tensor {}: added twice", e.name));
    const auto need = byte_count(e.shape, e.dtype);
    if (need != e.bytes.size())
        throw CheckpointError(fmt::format("checkpoint tensor {}: {} bytes given, shape {} of {} needs {}", e.name,
                                          e.bytes.size(), shape_string(e.shape), dtype_name(e.dtype),
                                          need ? fmt::format("{}", *need) : std::string("more than 2^64")));
    entries_.push_back(std::move(e));
}

void TensorFileWriter::add(const std::string& name, Dtype dtype, const Shape& shape, std::span<const std::byte> bytes) {
    auto owned = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    const std::span<const std::byte> view(owned->data(), owned->size());
    add_entry(Entry{name, dtype, shape, std::move(owned), view});
}

void TensorFileWriter::add_borrowed(const std::string& name, Dtype dtype, const Shape& shape,
                                    std::span<const std::byte> bytes) {
    add_entry(Entry{name, dtype, shape, nullptr, bytes});
}

void TensorFileWriter::set_metadata(const std::string& key, const std::string& value) {
    if (key == kMetaFormat || key == kMetaVersion || key == kMetaChecksum || key == kMetaHeaderChecksum)
        throw CheckpointError(fmt::format("checkpoint metadata: the key {} is written by the format itself", key));
    metadata_[key] = value;
}

std::vector<const TensorFileWriter::Entry*> TensorFileWriter::ordered() const {
    std::vector<const Entry*> order;
    for (const auto& e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
        const int ra = write_rank(a->dtype), rb = write_rank(b->dtype);
        return ra != rb ? ra < rb : a->name < b->name;
    });
    return order;
}

std::string TensorFileWriter::head(const std::vector<const Entry*>& order) const {
    Xxh64Stream data;
    for (const Entry* e : order) data.update(e->bytes.data(), e->bytes.size());
    std::map<std::string, std::string> meta = metadata_;
    meta[std::string(kMetaFormat)] = std::string(kFormatMarker);
    meta[std::string(kMetaVersion)] = fmt::format("{}", kFormatVersion);
    meta[std::string(kMetaChecksum)] = hex16(data.digest());
    std::vector<TableEntry> table;
    std::uint64_t at = 0;
    for (const Entry* e : order) {
        table.push_back({e->name, e->dtype, e->shape, at, at + e->bytes.size()});
        at += e->bytes.size();
    }
    meta[std::string(kMetaHeaderChecksum)] = hex16(fh::data::xxh64(header_checksum_input(meta, table)));

    json::Object root, metadata;
    for (const auto& [k, v] : meta) metadata.emplace_back(k, v);
    root.emplace_back("__metadata__", json::Value::object(std::move(metadata)));
    for (const auto& t : table)
        root.emplace_back(t.name, json::object({{"dtype", dtype_name(t.dtype)},
                                                {"shape", json::array_of(std::span<const std::uint64_t>(t.shape))},
                                                {"data_offsets", json::Value::array({t.begin, t.end})}}));
    std::string h = json::serialize(json::Value::object(std::move(root)));
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string out;
    put_u64(out, h.size());
    return out + h;
}

std::vector<std::byte> TensorFileWriter::serialize() const {
    const auto order = ordered();
    const std::string h = head(order);
    const auto* p = reinterpret_cast<const std::byte*>(h.data());
    std::vector<std::byte> out(p, p + h.size());
    for (const Entry* e : order) out.insert(out.end(), e->bytes.begin(), e->bytes.end());
    return out;
}

void TensorFileWriter::write(const std::string& path) const {
    const auto order = ordered();
    const std::string h = head(order);
    AtomicFile file(path,
                    [&](const std::string& m) { throw CheckpointError(fmt::format("checkpoint {}: {}", path, m)); });
    file.write(h.data(), h.size());
    for (const Entry* e : order) file.write(e->bytes.data(), e->bytes.size());
    file.commit();
}

// ---------------------------------------------------------------------------------------------
// TensorFile

void TensorFile::Unmap::operator()(void* mapping) const noexcept {
    ::munmap(mapping, size);
}

void TensorFile::fail(const std::string& what) const {
    throw CheckpointError(fmt::format("checkpoint {}: {}", path_, what));
}

TensorFile TensorFile::read(const std::string& path, const ReadOptions& options) {
    TensorFile f;
    f.path_ = path;
    util::RegularFile file(path);  // a FIFO or a device is refused, never opened blocking; closed on return
    if (!file.ok()) f.fail(file.error());
    f.size_ = static_cast<std::size_t>(file.size());
    if (f.size_ > 0) {
        void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
        if (m == MAP_FAILED) f.fail(fmt::format("cannot map: {}", std::strerror(errno)));
        f.mapping_ = std::unique_ptr<void, Unmap>(m, Unmap{f.size_});
        f.base_ = static_cast<const std::byte*>(m);
    }
    f.validate(options);
    return f;
}

TensorFile TensorFile::from_bytes(std::vector<std::byte> bytes, const std::string& label, const ReadOptions& options) {
    TensorFile f;
    f.path_ = label;
    f.memory_ = std::move(bytes);
    f.base_ = f.memory_.data();
    f.size_ = f.memory_.size();
    f.validate(options);
    return f;
}

void TensorFile::validate(const ReadOptions& options) {
    if (size_ < 8)
        fail(
            fmt::format("too short: {} bytes (a safetensors file starts with an 8-byte header length); "
                        "the file is truncated or not a checkpoint",
                        size_));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(base_[i]);
    if (n > kMaxHeaderBytes)
        fail(fmt::format("header length {} is larger than the limit of {} bytes; not a safetensors file?", n,
                         kMaxHeaderBytes));
    if (n > size_ - 8)
        fail(fmt::format("header length {} extends beyond the end of the file ({} bytes); the file is truncated", n,
                         size_));
    if (n == 0) fail("invalid JSON header: empty header");
    data_begin_ = 8 + static_cast<std::size_t>(n);
    const std::uint64_t data_size = size_ - data_begin_;

    const std::string_view text(reinterpret_cast<const char*>(base_ + 8), static_cast<std::size_t>(n));
    json::Value root;
    try {
        root = json::parse(text, json::Limits{kMaxHeaderBytes, 64});
    } catch (const json::ParseError& e) {
        fail(fmt::format("invalid JSON header at header byte {}: {}", e.offset(), e.reason()));
    }
    if (!root.is_object())
        fail(fmt::format("invalid header: the JSON is {}, expected an object", json::kind_name(root.kind())));

    std::vector<TableEntry> table;  // the tensors, in data order once sorted below
    const auto natural = [](const json::Value& v) { return v.is_integer() && !v.is_negative(); };
    for (const auto& [name, v] : root.as_object()) {
        if (name == "__metadata__") {
            if (!v.is_object()) fail("invalid header: __metadata__ is not an object");
            for (const auto& [k, mv] : v.as_object()) {
                if (!mv.is_string())
                    fail(fmt::format("invalid header: metadata {} is {}, expected a string", k,
                                     json::kind_name(mv.kind())));
                metadata_[k] = mv.as_string();
            }
            continue;
        }
        if (name.empty()) fail("invalid header: a tensor has an empty name");
        if (!v.is_object()) fail(fmt::format("invalid header: tensor {} is not an object", name));
        for (const auto& field : v.as_object())
            if (field.first != "dtype" && field.first != "shape" && field.first != "data_offsets")
                fail(fmt::format("invalid header: tensor {} has an unknown field {}", name, field.first));
        const json::Value *dt = v.find("dtype"), *sh = v.find("shape"), *off = v.find("data_offsets");
        if (!dt || !sh || !off)
            fail(fmt::format("invalid header: tensor {} lacks {}", name,
                             !dt   ? "dtype"
                             : !sh ? "shape"
                                   : "data_offsets"));
        if (!dt->is_string()) fail(fmt::format("invalid header: tensor {}: dtype is not a string", name));
        const auto dtype = dtype_from_name(dt->as_string());
        if (!dtype)
            fail(fmt::format("unknown dtype {} for tensor {} (supported: F32, F64, I32, I64, U8, U64)",
                             util::json_quote(dt->as_string()), name));
        if (!sh->is_array()) fail(fmt::format("invalid header: tensor {}: shape is not an array", name));
        Shape shape;
        for (const auto& d : sh->as_array()) {
            if (!natural(d)) fail(fmt::format("invalid header: tensor {}: shape entries must be integers >= 0", name));
            shape.push_back(d.as_u64());
        }
        if (!off->is_array() || off->as_array().size() != 2 || !natural(off->as_array()[0]) ||
            !natural(off->as_array()[1]))
            fail(fmt::format("invalid header: tensor {}: data_offsets must be [begin, end], integers >= 0", name));
        const std::uint64_t b = off->as_array()[0].as_u64(), e = off->as_array()[1].as_u64();
        if (b > e || e > data_size)
            fail(fmt::format("tensor {}: data_offsets [{}, {}] lie outside the data section of {} bytes", name, b, e,
                             data_size));
        if (byte_count(shape, *dtype) != e - b)
            fail(fmt::format("tensor {}: size {} bytes does not match shape {} of {} ({} bytes per element)", name,
                             e - b, shape_string(shape), dtype_name(*dtype), dtype_size(*dtype)));
        tensors_[name] = TensorView{
            *dtype, shape, std::span<const std::byte>(base_ + data_begin_ + b, static_cast<std::size_t>(e - b))};
        table.push_back({name, *dtype, shape, b, e});
    }

    // Tensors must tile the data section exactly, as safetensors requires.
    std::stable_sort(table.begin(), table.end(), [](const TableEntry& a, const TableEntry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
        const TableEntry& t = table[i];
        if (t.begin < at)
            fail(fmt::format("tensors {} and {} overlap (data_offsets must be sorted and disjoint)", table[i - 1].name,
                             t.name));
        if (t.begin > at)
            fail(fmt::format("gap in the data before tensor {} (bytes {}..{} belong to no tensor)", t.name, at,
                             t.begin));
        at = t.end;
        order_.push_back(t.name);
    }
    if (at != data_size)
        fail(fmt::format("the tensors cover {} bytes but the data section holds {} (trailing or missing bytes)", at,
                         data_size));

    if (!options.require_checkpoint) return;
    const auto marker = metadata(std::string(kMetaFormat));
    if (marker != std::string(kFormatMarker))
        fail(fmt::format("not a foxhunt checkpoint: metadata {} is {} (expected \"{}\")", kMetaFormat,
                         marker ? util::json_quote(*marker) : std::string("missing"), kFormatMarker));
    const auto version = metadata(std::string(kMetaVersion));
    if (version != "1" && version != fmt::format("{}", kFormatVersion))
        fail(
            fmt::format("checkpoint format version {} is not supported by this build (it reads versions 1 and {}); "
                        "was it written by a newer foxhunt-train?",
                        version ? util::json_quote(*version) : std::string("missing"), kFormatVersion));
    format_version_ = *version == "1" ? 1 : kFormatVersion;
    if (format_version_ == 1 && metadata(std::string(kMetaHeaderChecksum)))
        fail(
            fmt::format("the header says format version 1 but carries {}, which only version 2 writes: the version "
                        "was edited or is corrupt (use another checkpoint)",
                        kMetaHeaderChecksum));
    if (format_version_ != 1) {
        // Version 2: the metadata (the embedded profile, the normalisation clip, ...) and the
        // tensor table are covered too, so a same-length edit of either is caught.
        const auto header_sum = metadata(std::string(kMetaHeaderChecksum));
        if (!header_sum) fail(fmt::format("metadata {} (the header checksum) is missing", kMetaHeaderChecksum));
        const std::string actual_header = hex16(fh::data::xxh64(header_checksum_input(metadata_, table)));
        if (*header_sum != actual_header)
            fail(
                fmt::format("header checksum mismatch: the metadata and tensor table hash to {} but the header says "
                            "{}; the header was edited or is corrupt (use another checkpoint)",
                            actual_header, *header_sum));
    }
    const auto sum = metadata(std::string(kMetaChecksum));
    if (!sum) fail(fmt::format("metadata {} (the data checksum) is missing", kMetaChecksum));
    const std::string actual = hex16(fh::data::xxh64(base_ + data_begin_, static_cast<std::size_t>(data_size)));
    if (*sum != actual)
        fail(
            fmt::format("checksum mismatch: the data hashes to {} but the header says {}; the file is "
                        "corrupt (use another checkpoint)",
                        actual, *sum));
}

std::optional<std::string> TensorFile::metadata(const std::string& key) const {
    const auto it = metadata_.find(key);
    if (it == metadata_.end()) return std::nullopt;
    return it->second;
}

bool TensorFile::has(const std::string& name) const {
    return tensors_.count(name) != 0;
}

std::vector<std::string> TensorFile::names() const {
    return order_;
}

TensorView TensorFile::tensor(const std::string& name) const {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) fail(fmt::format("missing tensor {}", name));
    return it->second;
}

TensorView TensorFile::checked(const std::string& name, Dtype dtype, const Shape& expected) const {
    TensorView v = tensor(name);
    if (v.dtype != dtype)
        fail(fmt::format("tensor {} has dtype {}, expected {}", name, dtype_name(v.dtype), dtype_name(dtype)));
    if (v.shape != expected)
        fail(fmt::format("tensor {} has shape {}, expected {} (was the checkpoint written with another profile?)", name,
                         shape_string(v.shape), shape_string(expected)));
    return v;
}

}  // namespace fh::io
