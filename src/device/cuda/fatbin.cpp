/// @file fatbin.cpp
/// @brief Fatbin and ELF parsing. Layouts (checked on CUDA 13.0 output):
///   fatbin header (16 B): u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size;
///   entry header (>= 64 B): u16 kind (1 PTX, 2 ELF), u16 version, u32 header size,
///     u64 payload size, ..., u32 arch at +0x1c, u64 flags at +0x28 (0x2000 = compressed);
///   .nv.info records: u8 format, u8 attribute, then u16 value, or (format 4) u16 size + bytes;
///     EIATTR_KPARAM_INFO (0x17): u32 index, u16 ordinal, u16 offset, u32 flags (size = flags>>18);
///     EIATTR_PARAM_CBANK (0x0a): u32 section, u16 offset, u16 size.
#include "device/cuda/fatbin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace fh::cuda {
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr std::uint64_t kFlagCompressed = 0x2000;

template <class T>
T read_at(std::span<const std::byte> b, std::size_t off, const char* what) {
    if (off > b.size() || b.size() - off < sizeof(T))
        throw std::runtime_error(fmt::format("truncated {} (offset {} of {})", what, off, b.size()));
    T v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    return v;
}

std::span<const std::byte> sub(std::span<const std::byte> b, std::uint64_t off, std::uint64_t len, const char* what) {
    if (off > b.size() || len > b.size() - off)
        throw std::runtime_error(fmt::format("{} lies outside the image", what));
    return b.subspan(off, len);
}

struct Section {
    std::uint32_t name;
    std::uint32_t type;
    std::uint64_t offset;
    std::uint64_t size;
    std::uint32_t link;
};

struct Elf {
    std::span<const std::byte> bytes;
    std::vector<Section> sections;
    std::span<const std::byte> shstr;

    explicit Elf(std::span<const std::byte> b) : bytes(b) {
        if (b.size() < 64 || std::memcmp(b.data(),
                                         "\x7f"
                                         "ELF",
                                         4) != 0)
            throw std::runtime_error("not an ELF image");
        if (static_cast<unsigned char>(b[4]) != 2) throw std::runtime_error("not a 64-bit ELF");
        const auto shoff = read_at<std::uint64_t>(b, 0x28, "ELF header");
        const auto shentsize = read_at<std::uint16_t>(b, 0x3a, "ELF header");
        const auto shnum = read_at<std::uint16_t>(b, 0x3c, "ELF header");
        const auto shstrndx = read_at<std::uint16_t>(b, 0x3e, "ELF header");
        if (shentsize < 64) throw std::runtime_error("bad ELF section header size");
        for (unsigned i = 0; i < shnum; ++i) {
            const std::uint64_t h = shoff + std::uint64_t{i} * shentsize;
            sections.push_back(Section{read_at<std::uint32_t>(b, h + 0, "section header"),
                                       read_at<std::uint32_t>(b, h + 4, "section header"),
                                       read_at<std::uint64_t>(b, h + 24, "section header"),
                                       read_at<std::uint64_t>(b, h + 32, "section header"),
                                       read_at<std::uint32_t>(b, h + 40, "section header")});
        }
        if (shstrndx >= sections.size()) throw std::runtime_error("bad ELF string table index");
        shstr = data(sections[shstrndx]);
    }

    std::span<const std::byte> data(const Section& s) const {
        if (s.type == 8 /* SHT_NOBITS */) return {};
        return sub(bytes, s.offset, s.size, "ELF section");
    }

    static std::string string_at(std::span<const std::byte> table, std::size_t off) {
        if (off >= table.size()) throw std::runtime_error("ELF string outside its table");
        const char* p = reinterpret_cast<const char*>(table.data()) + off;
        const std::size_t n = strnlen(p, table.size() - off);
        if (n == table.size() - off) throw std::runtime_error("unterminated ELF string");
        return std::string(p, n);
    }

    std::string name(const Section& s) const { return string_at(shstr, s.name); }
};

void parse_nv_info(std::span<const std::byte> info, CubinKernel& k) {
    std::size_t p = 0;
    while (p + 4 <= info.size()) {
        const auto format = static_cast<unsigned char>(info[p]);
        const auto attr = static_cast<unsigned char>(info[p + 1]);
        const auto value = read_at<std::uint16_t>(info, p + 2, ".nv.info record");
        if (format != 4) {  // fixed-size record: the u16 is the value
            p += 4;
            continue;
        }
        const auto payload = sub(info, p + 4, value, ".nv.info record");
        if (attr == 0x17 && payload.size() >= 12) {  // EIATTR_KPARAM_INFO
            const auto ordinal = read_at<std::uint16_t>(payload, 4, "KPARAM_INFO");
            const auto offset = read_at<std::uint16_t>(payload, 6, "KPARAM_INFO");
            const auto flags = read_at<std::uint32_t>(payload, 8, "KPARAM_INFO");
            k.params.push_back(CubinParam{ordinal, offset, flags >> 18});
        } else if (attr == 0x0a && payload.size() >= 8) {  // EIATTR_PARAM_CBANK
            k.param_bytes = read_at<std::uint16_t>(payload, 6, "PARAM_CBANK");
        }
        p += 4 + value;
    }
    std::sort(k.params.begin(), k.params.end(),
              [](const CubinParam& a, const CubinParam& b) { return a.ordinal < b.ordinal; });
}

}  // namespace

std::vector<FatbinEntry> parse_fatbin(std::span<const std::byte> image) {
    if (read_at<std::uint32_t>(image, 0, "fatbin header") != kFatbinMagic)
        throw std::runtime_error("not a fatbin (bad magic)");
    const auto header_size = read_at<std::uint16_t>(image, 6, "fatbin header");
    const auto total = read_at<std::uint64_t>(image, 8, "fatbin header");
    const auto body = sub(image, header_size, total, "fatbin body");
    std::vector<FatbinEntry> entries;
    std::size_t off = 0;
    while (off + 0x30 <= body.size()) {
        const auto kind = read_at<std::uint16_t>(body, off, "fatbin entry");
        const auto ehs = read_at<std::uint32_t>(body, off + 4, "fatbin entry");
        const auto size = read_at<std::uint64_t>(body, off + 8, "fatbin entry");
        const auto arch = read_at<std::uint32_t>(body, off + 0x1c, "fatbin entry");
        const auto flags = read_at<std::uint64_t>(body, off + 0x28, "fatbin entry");
        if (ehs < 0x30) throw std::runtime_error("bad fatbin entry header size");
        FatbinEntry e;
        e.kind = kind == 1 ? FatbinEntry::Kind::ptx : kind == 2 ? FatbinEntry::Kind::cubin : FatbinEntry::Kind::unknown;
        e.arch = arch;
        e.compressed = (flags & kFlagCompressed) != 0;
        e.payload = sub(body, off + ehs, size, "fatbin entry payload");
        entries.push_back(e);
        off += ehs + size;
    }
    return entries;
}

std::vector<CubinKernel> parse_cubin_kernels(std::span<const std::byte> bytes) {
    const Elf elf(bytes);
    std::vector<CubinKernel> kernels;
    const std::string prefix = ".nv.info.";
    for (const auto& s : elf.sections) {
        const std::string n = elf.name(s);
        if (n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
        CubinKernel k;
        k.name = n.substr(prefix.size());
        parse_nv_info(elf.data(s), k);
        kernels.push_back(std::move(k));
    }
    std::sort(kernels.begin(), kernels.end(),
              [](const CubinKernel& a, const CubinKernel& b) { return a.name < b.name; });
    return kernels;
}

std::vector<std::string> elf_needed_libraries(std::span<const std::byte> bytes) {
    const Elf elf(bytes);
    std::vector<std::string> needed;
    for (const auto& s : elf.sections) {
        if (s.type != 6 /* SHT_DYNAMIC */) continue;
        if (s.link >= elf.sections.size()) throw std::runtime_error("bad .dynamic link");
        const auto dynstr = elf.data(elf.sections[s.link]);
        const auto dyn = elf.data(s);
        for (std::size_t p = 0; p + 16 <= dyn.size(); p += 16) {
            const auto tag = read_at<std::int64_t>(dyn, p, ".dynamic");
            const auto val = read_at<std::uint64_t>(dyn, p + 8, ".dynamic");
            if (tag == 0) break;
            if (tag == 1 /* DT_NEEDED */) needed.push_back(Elf::string_at(dynstr, val));
        }
    }
    return needed;
}

}  // namespace fh::cuda
