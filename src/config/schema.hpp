/// @file schema.hpp
/// @brief The profile schema: one descriptor per key (type, range or choices, one-line meaning,
///        binding to its Profile field). It drives parsing, validation, defaults (read from a
///        default-constructed Profile), the resolved-profile emitter and the docs test.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/profile.hpp"

namespace fh::config {

enum class KeyType { integer, number, boolean, string, int_array };

/// "integer", "float", "bool", "string", "array of integers" (the docs' type column).
std::string_view type_name(KeyType t);

/// A pointer to the Profile field a key is bound to.
using FieldPtr = std::variant<std::int64_t*, double*, bool*, std::string*, std::vector<std::int64_t>*>;

/// A key's value, detached from any Profile.
using KeyValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>>;

/// Extra rules a key has beyond its range or choices.
enum class Rule {
    none,
    odd,           ///< integer must be odd
    device,        ///< auto | cpu | cuda | cuda:N
    device_class,  ///< "auto" or a name of [a-z0-9_-]
    no_newline,    ///< strings that are names or paths: no control characters
    run_name,      ///< no_newline, and one directory name: no '/', not "." or "..", <= 200 bytes
};

/// Bounds of a number (or of each element of an integer array).
struct Bounds {
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    bool lo_open = false;  ///< lo itself is excluded
    bool hi_open = false;  ///< hi itself is excluded
};

struct KeyDescriptor {
    std::string_view section;
    std::string_view key;
    KeyType type;
    Bounds bounds;             ///< numbers, integers, and each element of an int array
    std::string_view choices;  ///< strings: allowed values separated by '|'; "" = any
    Rule rule = Rule::none;
    std::int64_t min_items = 0;  ///< int arrays: length range
    std::int64_t max_items = 0;
    bool required = false;        ///< only run.trainer
    std::string_view doc;         ///< one-line meaning (no '|' characters: it is a table cell)
    FieldPtr (*field)(Profile&);  ///< where the value lives

    std::string full_name() const;  ///< "section.key"
    /// The allowed values in words, as docs/profiles.md shows them ("[0, 1]", "dqn, ppo, iql").
    std::string range_text() const;
    /// Checks a value against type-independent rules: range, choices, odd, ... Returns "" when
    /// the value is allowed, else what is wrong ("must be odd, got 4").
    std::string check(const KeyValue& value) const;
};

struct SectionDescriptor {
    std::string_view name;
    std::string_view doc;
};

/// Every key, in the order of the resolved profile and docs/profiles.md.
const std::vector<KeyDescriptor>& schema();
/// Every section, in order.
const std::vector<SectionDescriptor>& sections();

/// The descriptor of section.key, or nullptr.
const KeyDescriptor* find_key(std::string_view section, std::string_view key);
bool is_section(std::string_view section);

/// Read and write a key's value in a profile.
KeyValue get_value(const Profile& p, const KeyDescriptor& k);
void set_value(Profile& p, const KeyDescriptor& k, const KeyValue& v);

/// A value as TOML text: shortest round-trip floats (always with '.', 'e', "inf" or "nan"),
/// escaped basic strings, `[a, b]` arrays.
std::string toml_value_text(const KeyValue& v);
/// A string as a TOML basic string (quotes and escapes).
std::string toml_quote(std::string_view s);

/// The closest candidate by edit distance (case-insensitive), if it is close enough to be a
/// plausible typo of `word`.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

/// Keys that never enter a derived run name or a comparison of settings: where and how a run is
/// stored and on which device it runs, not what it computes (the seed is named on its own).
bool is_placement_key(std::string_view section_dot_key);

}  // namespace fh::config
