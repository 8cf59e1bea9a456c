/// @file toml_reader.cpp
/// @brief The only translation unit that includes toml++ (SPEC section 4; TOOLCHAIN.md lists
///        the toml++ 3.3.0 pitfalls handled here).
#include "config/toml_reader.hpp"

// toml++ 3.3.0 trips internal assertions (abort) on inputs such as `[=]`, `[&` and `[[[1]]]`
// in builds without NDEBUG; upstream later removed those asserts. They guard nothing we rely on:
// the parser reports such inputs as ordinary syntax errors once the asserts are gone.
#define TOML_ASSERT(expr) static_cast<void>(0)
#define TOML_ENABLE_FORMATTERS 0  // we never use toml++'s printer (see emit.cpp)
#include <toml++/toml.h>

#include <fmt/format.h>

#include <algorithm>

#include "config/profile.hpp"

namespace fh::config {
namespace {

Location location_of(const toml::source_region& r, std::string_view origin) {
    return Location{std::string(origin), static_cast<int>(r.begin.line),
                    static_cast<int>(r.begin.column)};
}

TomlValue convert(const toml::node& node, std::string_view origin);

TomlValue convert_table(const toml::table& t, std::string_view origin) {
    TomlValue out;
    out.kind = TomlValue::Kind::table;
    out.where = location_of(t.source(), origin);
    struct Entry {
        const toml::key* key;
        const toml::node* node;
    };
    std::vector<Entry> entries;
    for (auto&& [k, v] : t) entries.push_back({&k, &v});
    // toml::table is ordered by key; report in document order instead.
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        const auto& pa = a.key->source().begin;
        const auto& pb = b.key->source().begin;
        return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
    });
    for (const auto& e : entries) {
        out.keys.emplace_back(e.key->str());
        out.key_where.push_back(location_of(e.key->source(), origin));
        out.items.push_back(convert(*e.node, origin));
    }
    return out;
}

TomlValue convert(const toml::node& node, std::string_view origin) {
    TomlValue out;
    out.where = location_of(node.source(), origin);
    switch (node.type()) {
        case toml::node_type::table: return convert_table(*node.as_table(), origin);
        case toml::node_type::array:
            out.kind = TomlValue::Kind::array;
            for (const auto& e : *node.as_array()) out.items.push_back(convert(e, origin));
            break;
        case toml::node_type::string:
            out.kind = TomlValue::Kind::string;
            out.string = node.as_string()->get();
            break;
        case toml::node_type::integer:
            out.kind = TomlValue::Kind::integer;
            out.integer = node.as_integer()->get();
            break;
        case toml::node_type::floating_point:
            out.kind = TomlValue::Kind::floating;
            out.floating = node.as_floating_point()->get();
            break;
        case toml::node_type::boolean:
            out.kind = TomlValue::Kind::boolean;
            out.boolean = node.as_boolean()->get();
            break;
        default: out.kind = TomlValue::Kind::date_time; break;
    }
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool is_bare_key(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

/// toml++'s descriptions are single sentences without a trailing period; keep them, but drop
/// the internal "Error while parsing X: " prefix noise where present.
std::string describe(const toml::parse_error& e) {
    std::string d(e.description());
    return d;
}

}  // namespace

std::string Location::text() const {
    if (line > 0 && column > 0) return fmt::format("{}:{}:{}", origin, line, column);
    if (line > 0) return fmt::format("{}:{}", origin, line);
    return origin;
}

std::string_view kind_phrase(TomlValue::Kind k) {
    switch (k) {
        case TomlValue::Kind::integer: return "an integer";
        case TomlValue::Kind::floating: return "a float";
        case TomlValue::Kind::boolean: return "a bool";
        case TomlValue::Kind::string: return "a string";
        case TomlValue::Kind::array: return "an array";
        case TomlValue::Kind::table: return "a table";
        case TomlValue::Kind::date_time: return "a date/time";
    }
    return "a value";
}

bool validate_utf8(std::string_view text, int& line, int& column) {
    line = 1;
    column = 1;
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            len = 1;
            cp = c;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;  // continuation byte without a lead, or 0xF8..0xFF
        }
        if (i + len > n) return false;
        for (std::size_t j = 1; j < len; ++j) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid.
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return false;
        if (c == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
        i += len;
    }
    return true;
}

TomlValue parse_toml(std::string_view text, std::string_view origin) {
    if (text.size() > kMaxProfileBytes)
        throw ProfileError({fmt::format("{}: the profile is {} bytes; the limit is {} (1 MiB): is "
                                        "this really a profile?",
                                        origin, text.size(), kMaxProfileBytes)});
    int line = 0, column = 0;
    if (!validate_utf8(text, line, column))
        throw ProfileError({fmt::format("{}:{}:{}: invalid UTF-8 (a profile is UTF-8 text; is this "
                                        "a binary file or in another encoding?)",
                                        origin, line, column)});
    try {
        const toml::table t = toml::parse(text, origin);
        return convert_table(t, origin);
    } catch (const toml::parse_error& e) {
        const auto& b = e.source().begin;
        throw ProfileError({fmt::format("{}:{}:{}: TOML syntax error: {}", origin,
                                        std::max<std::uint32_t>(b.line, 1),
                                        std::max<std::uint32_t>(b.column, 1), describe(e))});
    }
}

Override parse_override(std::string_view text,
                        bool (*is_string_key)(std::string_view, std::string_view)) {
    Override o;
    o.where.origin = fmt::format("--set {}", text);
    const auto fail = [&](const std::string& m) -> ProfileError {
        return ProfileError({fmt::format("{}: {}", o.where.origin, m)});
    };
    int line = 0, column = 0;
    if (!validate_utf8(text, line, column)) throw fail("invalid UTF-8");
    if (text.size() > 64 * 1024) throw fail("the override is longer than 64 KiB");
    const auto eq = text.find('=');
    if (eq == std::string_view::npos)
        throw fail("expected section.key=value (e.g. --set training.learning_rate=3e-4)");
    const auto name = trim(text.substr(0, eq));
    const auto value = trim(text.substr(eq + 1));
    const auto dot = name.find('.');
    if (dot == std::string_view::npos || !is_bare_key(name.substr(0, dot)) ||
        !is_bare_key(name.substr(dot + 1)))
        throw fail(fmt::format("\"{}\" is not section.key (e.g. dqn.hidden)", name));
    o.section = std::string(name.substr(0, dot));
    o.key = std::string(name.substr(dot + 1));
    if (value.find_first_of("\r\n") != std::string_view::npos)
        throw fail("the value must be on one line");

    const std::string doc = fmt::format("v = {}\n", value);
    try {
        const toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
        const toml::node* v = t.get("v");
        if (t.size() != 1 || v == nullptr) throw fail("the value must be a single TOML value");
        o.value = convert(*v, o.where.origin);
    } catch (const toml::parse_error& e) {
        if (is_string_key != nullptr && is_string_key(o.section, o.key) &&
            value.find_first_of("\"'[]{}=#") == std::string_view::npos) {
            o.value.kind = TomlValue::Kind::string;  // a bare word: --set run.trainer=dqn
            o.value.string = std::string(value);
        } else {
            const auto col = static_cast<int>(e.source().begin.column) - 4;  // after "v = "
            throw fail(fmt::format("the value is not valid TOML ({}{}); strings need quotes, "
                                   "arrays brackets: --set dqn.hidden=[256,256]",
                                   e.description(),
                                   col > 0 ? fmt::format(" at character {} of the value", col) : ""));
        }
    }
    // Every value position is the override itself.
    struct Fix {
        const Location& where;
        void operator()(TomlValue& v) const {
            v.where = where;
            for (auto& i : v.items) (*this)(i);
            for (auto& k : v.key_where) k = where;
        }
    };
    Fix{o.where}(o.value);
    return o;
}

}  // namespace fh::config
