/// @file toml_reader.hpp
/// @brief TOML text -> a plain tree of values with source positions. toml_reader.cpp is the
///        only translation unit that includes toml++ (about 30 s to compile); everything else
///        works on these structs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fh::config {

/// Where something came from: a file position, or a command-line override.
struct Location {
    std::string origin;  ///< file path, or the override text ("--set dqn.hidden=[64]")
    int line = 0;        ///< 1-based; 0 = not a file position (command line, default)
    int column = 0;      ///< 1-based; 0 = unknown
    /// "file:line:col", "file:line", or the origin alone.
    std::string text() const;
};

/// A TOML value with its position. Tables keep their entries in document order.
struct TomlValue {
    enum class Kind { integer, floating, boolean, string, array, table, date_time };
    Kind kind = Kind::table;
    std::int64_t integer = 0;
    double floating = 0;
    bool boolean = false;
    std::string string;
    std::vector<TomlValue> items;     ///< array elements, or table values
    std::vector<std::string> keys;    ///< table keys (parallel to items)
    std::vector<Location> key_where;  ///< table key positions (parallel to items)
    Location where;                   ///< the value (a table: its header, if any)
};

/// Deepest nesting a profile may have (tables, dotted keys and arrays together; a profile needs
/// 3). Deeper text is refused before toml++ builds its tree, which is recursive.
inline constexpr int kMaxNesting = 32;

/// "an integer", "a float", "a table", ... for messages.
std::string_view kind_phrase(TomlValue::Kind k);

/// Parses TOML text into a table. Skips a UTF-8 byte order mark, validates UTF-8 first (toml++
/// 3.3.0 has undefined behaviour on invalid UTF-8), refuses text over kMaxProfileBytes and
/// nesting deeper than kMaxNesting.
/// @throws ProfileError with one `origin:line:col: message` on a syntax error.
TomlValue parse_toml(std::string_view text, std::string_view origin);

/// One `--set section.key=value`: the value is parsed as TOML (`v = <value>`); if that fails and
/// `bare_word_ok` (the key is a string key), the raw text is taken as a string.
struct Override {
    std::string section, key;
    TomlValue value;
    Location where;  ///< origin = "--set <text>"
};

/// Splits and parses one override. `is_string_key(section, key)` decides bare-word strings.
/// @throws ProfileError with one message on malformed text.
Override parse_override(std::string_view text, bool (*is_string_key)(std::string_view section, std::string_view key));

}  // namespace fh::config
