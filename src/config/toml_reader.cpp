/// @file toml_reader.cpp
/// @brief The only translation unit that includes toml++ (SPEC section 4; TOOLCHAIN.md lists
///        the toml++ 3.3.0 pitfalls handled here).
#include "config/toml_reader.hpp"

// toml++ 3.3.0 trips internal assertions (abort) on inputs such as `[=]`, `[&` and `[[[1]]]`
// in builds without NDEBUG; upstream later removed those asserts. They guard nothing we rely on:
// the parser reports such inputs as ordinary syntax errors once the asserts are gone.
#define TOML_ASSERT(expr) static_cast<void>(0)
#define TOML_ENABLE_FORMATTERS 0  // we never use toml++'s printer (see emit.cpp)
#define TOML_ENABLE_UNRELEASED_FEATURES 0  // no unicode bare keys (their table has the bug below)
#include <toml++/toml.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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

namespace {

/// True for the code points on which toml++ 3.3.0's generated
/// `impl::is_non_ascii_horizontal_whitespace` reaches `__builtin_unreachable` (undefined
/// behaviour, found by fuzz/): its range table misses most of [U+00A1, U+0499] and
/// [U+2C5E, U+3058]. This mirrors the table exactly.
bool tomlpp_whitespace_ub(std::uint32_t c) {
    if (c < 0xA0 || c > 0xFEFF) return false;
    const std::uint64_t child = (static_cast<std::uint64_t>(c) - 0xA0u) / 0x3FAu;
    if ((1ull << child) & 0x7FFFFFFFFFFFF75Eull) return false;
    if (c == 0xA0 || c == 0x3000 || c == 0xFEFF) return false;
    return child != 5 && child != 7;
}

/// What toml++ counts as whitespace (ASCII and the non-ASCII code points it knows).
bool tomlpp_whitespace(std::uint32_t c) {
    return c == ' ' || c == '\t' || (c >= '\n' && c <= '\r') || c == 0xA0 || c == 0x1680 ||
           c == 0x180E || (c >= 0x2000 && c <= 0x200B) || c == 0x202F || c == 0x205F ||
           c == 0x2060 || c == 0x3000 || c == 0xFEFF || c == 0x2028 || c == 0x2029 || c == 0x85;
}

/// Finds, in valid UTF-8, the places where toml++ 3.3.0 would test a non-ASCII character for
/// whitespace (outside strings and comments, after a backslash in a basic string, and after a
/// line-ending backslash in a multi-line basic string), which is undefined behaviour for many
/// code points. Outside strings and comments non-ASCII is never valid TOML 1.0 anyway. A tiny
/// lexer of strings and comments: exact for valid TOML; on the first definite syntax error (a
/// line break in a single-line string) it stops, since toml++ stops there too.
bool find_tomlpp_hazard(std::string_view text, int& line, int& column, std::string& why) {
    enum class S { normal, comment, basic, literal, ml_basic, ml_literal } state = S::normal;
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    line = 1;
    column = 1;
    const auto decode = [&](std::size_t at, std::size_t& len) -> std::uint32_t {
        const unsigned char c = s[at];
        if (c < 0x80) { len = 1; return c; }
        len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        std::uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (std::size_t j = 1; j < len && at + j < n; ++j) cp = (cp << 6) | (s[at + j] & 0x3F);
        return cp;
    };
    const auto advance = [&](std::size_t len, std::uint32_t cp) {
        i += len;
        if (cp == '\n') { ++line; column = 1; } else { ++column; }
    };
    const auto starts = [&](const char* three) {
        return i + 3 <= n && std::memcmp(s + i, three, 3) == 0;
    };
    while (i < n) {
        std::size_t len = 0;
        const std::uint32_t cp = decode(i, len);
        switch (state) {
            case S::normal:
                if (cp == '#') state = S::comment;
                else if (starts("\"\"\"")) { advance(1, cp); advance(1, cp); state = S::ml_basic; }
                else if (cp == '"') state = S::basic;
                else if (starts("'''")) { advance(1, cp); advance(1, cp); state = S::ml_literal; }
                else if (cp == '\'') state = S::literal;
                else if (cp >= 0x80) {
                    why = "non-ASCII character outside a string or comment (keys are ASCII; put "
                          "text in quotes)";
                    return true;
                }
                advance(len, cp);
                break;
            case S::comment:
                if (cp == '\n') state = S::normal;
                advance(len, cp);
                break;
            case S::literal:
                if (cp == '\n') return false;
                if (cp == '\'') state = S::normal;
                advance(len, cp);
                break;
            case S::ml_literal:
                if (starts("'''")) {
                    for (int k = 0; k < 3; ++k) advance(1, '\'');
                    for (int k = 0; k < 2 && i < n && s[i] == '\''; ++k) advance(1, '\'');
                    state = S::normal;
                    continue;
                }
                advance(len, cp);
                break;
            case S::basic:
            case S::ml_basic: {
                if (cp == '\n' && state == S::basic) return false;
                if (state == S::ml_basic && starts("\"\"\"")) {
                    for (int k = 0; k < 3; ++k) advance(1, '"');
                    for (int k = 0; k < 2 && i < n && s[i] == '"'; ++k) advance(1, '"');
                    state = S::normal;
                    continue;
                }
                if (cp == '"' && state == S::basic) {
                    state = S::normal;
                    advance(len, cp);
                    continue;
                }
                if (cp != '\\') {
                    advance(len, cp);
                    continue;
                }
                advance(len, cp);  // the backslash
                if (i >= n) return false;
                std::size_t len2 = 0;
                const std::uint32_t next = decode(i, len2);
                if (next >= 0x80) {
                    why = "a backslash in a string must start an escape such as \\n, \\t, "
                          "\\\", \\\\ or \\uXXXX";
                    return true;
                }
                if (state == S::ml_basic && tomlpp_whitespace(next)) {
                    // a line-ending backslash: toml++ skips whitespace, testing each character
                    while (i < n) {
                        std::size_t l = 0;
                        const std::uint32_t c = decode(i, l);
                        if (!tomlpp_whitespace(c)) {
                            if (tomlpp_whitespace_ub(c)) {
                                why = "toml++ 3.3.0 cannot read this character right after a "
                                      "line-ending backslash (a bug in the library); move it to "
                                      "the previous line or remove the backslash";
                                return true;
                            }
                            break;
                        }
                        advance(l, c);
                    }
                    continue;
                }
                advance(len2, next);  // the escaped character
                break;
            }
        }
    }
    return false;
}

}  // namespace

TomlValue parse_toml(std::string_view text, std::string_view origin) {
    if (text.size() > kMaxProfileBytes)
        throw ProfileError({fmt::format("{}:1:1: the profile is {} bytes; the limit is {} (1 MiB): is "
                                        "this really a profile?",
                                        origin, text.size(), kMaxProfileBytes)});
    int line = 0, column = 0;
    if (!validate_utf8(text, line, column))
        throw ProfileError({fmt::format("{}:{}:{}: invalid UTF-8 (a profile is UTF-8 text; is this "
                                        "a binary file or in another encoding?)",
                                        origin, line, column)});
    std::string why;
    if (find_tomlpp_hazard(text, line, column, why))
        throw ProfileError({fmt::format("{}:{}:{}: TOML syntax error: {}", origin, line, column, why)});
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
    if (std::string why; find_tomlpp_hazard(doc, line, column, why)) {
        if (is_string_key != nullptr && is_string_key(o.section, o.key) &&
            value.find_first_of("\"'[]{}=#\\") == std::string_view::npos) {
            o.value.kind = TomlValue::Kind::string;  // a bare non-ASCII word: --set run.name=Zürich
            o.value.string = std::string(value);
            o.value.where = o.where;
            return o;
        }
        throw fail(fmt::format("the value is not valid TOML ({})", why));
    }
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
