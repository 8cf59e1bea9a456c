/// @file json_string.hpp
/// @brief A string as a JSON string literal (quotes, escapes, control bytes as \u00XX): one
///        definition for the JSON writer (io/json) and the JSON log lines (util/log), which sits
///        below io.
#pragma once

#include <string>
#include <string_view>

namespace fh::util {

/// `s` quoted and escaped as a JSON string literal (bytes >= 0x20 pass through unchanged).
std::string json_quote(std::string_view s);

}  // namespace fh::util
