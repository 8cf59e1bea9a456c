/// @file json_string.cpp
/// @brief A string as a JSON string literal; see json_string.hpp.
#include "util/json_string.hpp"

#include <fmt/format.h>

namespace fh::util {

std::string json_quote(std::string_view s) {
    // The characters with a short escape, and the letter each one takes after the backslash.
    static constexpr std::string_view kShort = "\"\\\b\f\n\r\t", kLetter = "\"\\bfnrt";
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (const auto k = kShort.find(ch); k != std::string_view::npos) {
            out += '\\';
            out += kLetter[k];
        } else if (c < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

}  // namespace fh::util
