/// @file utf8.hpp
/// @brief Decoding one UTF-8 sequence strictly, for the JSON reader and the profile reader alike:
///        overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid.
#pragma once

#include <cstdint>
#include <string_view>

namespace fh::io {

enum class Utf8 { ok, invalid, truncated };

/// Decodes the sequence at the start of `s` (not empty) into its code point `cp` and its length
/// in bytes `len`; `truncated` when `s` ends inside a sequence whose lead byte is valid.
inline Utf8 decode_utf8(std::string_view s, std::uint32_t& cp, std::size_t& len) {
    const auto lead = static_cast<unsigned char>(s[0]);
    len = lead < 0x80                    ? 1
          : lead >= 0xC2 && lead <= 0xDF ? 2
          : lead >= 0xE0 && lead <= 0xEF ? 3
          : lead >= 0xF0 && lead <= 0xF4 ? 4
                                         : 0;
    if (len == 0) return Utf8::invalid;  // a continuation byte without a lead, 0xC0, 0xC1 or 0xF5..0xFF
    if (s.size() < len) return Utf8::truncated;
    cp = len == 1 ? lead : lead & (0x7Fu >> len);
    for (std::size_t i = 1; i < len; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if ((c & 0xC0) != 0x80) return Utf8::invalid;
        cp = (cp << 6) | (c & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    return overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF ? Utf8::invalid : Utf8::ok;
}

}  // namespace fh::io
