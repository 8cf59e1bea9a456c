/// @file json.cpp
#include "io/json.hpp"

#include "io/utf8.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

namespace fh::io::json {

ParseError::ParseError(std::size_t offset, const std::string& message)
    : std::runtime_error(fmt::format("at byte {}: {}", offset, message)), offset_(offset), reason_(message) {}

Value Value::boolean(bool b) {
    Value v(Kind::boolean);
    v.bool_ = b;
    return v;
}
Value Value::integer(bool negative, std::uint64_t magnitude) {
    Value v(Kind::integer);
    v.negative_ = negative && magnitude != 0;
    v.magnitude_ = magnitude;
    return v;
}
Value Value::number(double d) {
    if (!std::isfinite(d)) return Value();
    Value v(Kind::number);
    v.number_ = d;
    return v;
}
Value Value::string(std::string s) {
    Value v(Kind::string);
    v.string_ = std::move(s);
    return v;
}
Value Value::array(Array a) {
    Value v(Kind::array);
    v.array_ = std::make_shared<const Array>(std::move(a));
    return v;
}
Value Value::object(Object o) {
    Value v(Kind::object);
    v.object_ = std::make_shared<const Object>(std::move(o));
    return v;
}

const Value& Value::expect(Kind want) const {
    if (kind_ != want)
        throw std::logic_error(fmt::format("json: expected {}, have {}", kind_name(want), kind_name(kind_)));
    return *this;
}

std::uint64_t Value::as_u64() const {
    if (expect(Kind::integer).negative_) throw std::logic_error("json: negative integer read as unsigned");
    return magnitude_;
}
std::int64_t Value::as_i64() const {
    expect(Kind::integer);
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (!negative_) {
        if (magnitude_ > max) throw std::logic_error("json: integer above int64 range");
        return static_cast<std::int64_t>(magnitude_);
    }
    if (magnitude_ > max + 1) throw std::logic_error("json: integer below int64 range");
    return magnitude_ == max + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude_);
}
double Value::as_double() const {
    if (kind_ == Kind::number) return number_;
    if (kind_ != Kind::integer) expect(Kind::number);
    const double m = static_cast<double>(magnitude_);
    return negative_ ? -m : m;
}
const Value* Value::find(std::string_view key) const {
    for (const auto& [k, v] : as_object())
        if (k == key) return &v;
    return nullptr;
}

const char* kind_name(Value::Kind k) noexcept {
    static constexpr const char* kNames[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    static_assert(std::size(kNames) == static_cast<std::size_t>(Value::Kind::object) + 1, "a name per Kind, in order");
    const auto i = static_cast<std::size_t>(k);
    return i < std::size(kNames) ? kNames[i] : "?";
}

namespace {

class Parser {
public:
    Parser(std::string_view text, const Limits& limits) : s_(text), limits_(limits) {}

    Value document() {
        if (s_.size() > limits_.max_bytes)
            fail(0, fmt::format("input of {} bytes exceeds the limit of {} bytes", s_.size(), limits_.max_bytes));
        skip_ws();
        Value v = value(0);
        skip_ws();
        if (pos_ != s_.size()) fail(pos_, "trailing characters after the JSON value");
        return v;
    }

private:
    std::string_view s_;
    Limits limits_;
    std::size_t pos_ = 0;

    [[noreturn]] static void fail(std::size_t at, const std::string& msg) { throw ParseError(at, msg); }

    bool at_end() const { return pos_ >= s_.size(); }
    unsigned char peek() const { return static_cast<unsigned char>(s_[pos_]); }

    static std::string describe(unsigned char c) {
        if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
        return fmt::format("byte 0x{:02x}", c);
    }

    void skip_ws() {
        while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
    }

    void expect_literal(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) fail(pos_, fmt::format("invalid literal, expected {}", word));
        pos_ += word.size();
    }

    Value value(int depth) {
        if (at_end()) fail(pos_, "unexpected end of input, expected a value");
        const unsigned char c = peek();
        switch (c) {
            case '{':
                return object(depth + 1);
            case '[':
                return array(depth + 1);
            case '"':
                return Value::string(string());
            case 't':
                expect_literal("true");
                return Value::boolean(true);
            case 'f':
                expect_literal("false");
                return Value::boolean(false);
            case 'n':
                expect_literal("null");
                return Value();
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return number();
                fail(pos_, fmt::format("unexpected {}, expected a value", describe(c)));
        }
    }

    void check_depth(int depth) const {
        if (depth > limits_.max_depth) fail(pos_, fmt::format("nesting deeper than {} levels", limits_.max_depth));
    }

    Value object(int depth) {
        check_depth(depth);
        ++pos_;  // '{'
        Object members;
        std::vector<std::size_t> key_at;  // each member's key offset, for the duplicate message
        skip_ws();
        if (consume('}')) return Value::object(std::move(members));
        for (;;) {
            skip_ws();
            if (at_end() || peek() != '"') fail(pos_, "expected a string key in the object");
            key_at.push_back(pos_);
            std::string key = string();
            skip_ws();
            if (!consume(':')) fail(pos_, "expected ':' after the object key");
            skip_ws();
            Value v = value(depth);
            members.emplace_back(std::move(key), std::move(v));
            if (closed('}', "object")) {
                check_unique_keys(members, key_at);
                return Value::object(std::move(members));
            }
        }
    }

    /// Skips `c` when it is next.
    bool consume(char c) {
        if (at_end() || peek() != c) return false;
        ++pos_;
        return true;
    }

    /// After a member of the `what` (object, array): true past its `close`, false past the ','
    /// before another; anything else fails.
    bool closed(char close, const char* what) {
        skip_ws();
        if (at_end()) fail(pos_, fmt::format("unexpected end of input inside an {}", what));
        if (consume(',')) return false;
        if (consume(close)) return true;
        fail(pos_, fmt::format("unexpected {}, expected ',' or '{}' in the {}", describe(peek()), close, what));
    }

    /// Refuses a repeated key, naming the first repetition in document order. Sorting makes
    /// it O(n log n): a header of a million tensors is checked in about a second, where comparing
    /// each key with every earlier one took minutes.
    static void check_unique_keys(const Object& members, const std::vector<std::size_t>& key_at) {
        if (members.size() < 2) return;
        std::vector<std::size_t> order(members.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return members[a].first < members[b].first; });
        std::size_t first_repeat = members.size();
        for (std::size_t i = 1; i < order.size(); ++i)
            if (members[order[i]].first == members[order[i - 1]].first)
                first_repeat = std::min(first_repeat, order[i]);  // stable: order[i] is the later one
        if (first_repeat < members.size())
            fail(key_at[first_repeat], fmt::format("duplicate key {}", util::json_quote(members[first_repeat].first)));
    }

    Value array(int depth) {
        check_depth(depth);
        ++pos_;  // '['
        Array items;
        skip_ws();
        if (consume(']')) return Value::array(std::move(items));
        for (;;) {
            skip_ws();
            items.push_back(value(depth));
            if (closed(']', "array")) return Value::array(std::move(items));
        }
    }

    Value number() {
        const std::size_t start = pos_;
        bool negative = false;
        if (peek() == '-') {
            negative = true;
            ++pos_;
        }
        if (at_end() || peek() < '0' || peek() > '9') fail(pos_, "expected a digit");
        if (peek() == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
            fail(pos_, "leading zeros are not allowed");
        std::uint64_t m = 0;
        while (!at_end() && peek() >= '0' && peek() <= '9') {
            const std::uint64_t d = peek() - '0';
            if (m > (std::numeric_limits<std::uint64_t>::max() - d) / 10) fail(start, "integer out of range");
            m = m * 10 + d;
            ++pos_;
        }
        if (!at_end() && (peek() == '.' || peek() == 'e' || peek() == 'E')) {
            if (!limits_.allow_fractions)
                fail(start, "numbers with a fraction or an exponent are not supported (integers only)");
            return fraction(start);
        }
        if (negative && m > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1)
            fail(start, "integer out of range");
        return Value::integer(negative, m);
    }

    // The rest of a number after its integer digits: [. digits] [e|E [+|-] digits], read as a double.
    Value fraction(std::size_t start) {
        auto digits = [&] {
            const std::size_t from = pos_;
            while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
            if (pos_ == from) fail(pos_, "expected a digit");
        };
        if (peek() == '.') {
            ++pos_;
            digits();
        }
        if (!at_end() && (peek() == 'e' || peek() == 'E')) {
            ++pos_;
            if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
            digits();
        }
        double d = 0;
        const auto [ptr, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
        if (ec != std::errc() || ptr != s_.data() + pos_ || !std::isfinite(d)) fail(start, "number out of range");
        return Value::number(d);
    }

    unsigned hex4() {
        if (s_.size() - pos_ < 4) fail(pos_, "truncated \\u escape");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i, ++pos_) {
            const unsigned char c = peek();
            const auto d = std::string_view("0123456789abcdefABCDEF").find(static_cast<char>(c));
            if (d == std::string_view::npos)
                fail(pos_, fmt::format("invalid hex digit {} in a \\u escape", describe(c)));
            v = v * 16 + static_cast<unsigned>(d < 16 ? d : d - 6);
        }
        return v;
    }

    static void append_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
            return;
        }
        const int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;  // bytes; the lead byte is 0xC0, 0xE0 or 0xF0
        out += static_cast<char>(((0xFF00u >> n) & 0xFFu) | (cp >> (6 * (n - 1))));
        for (int k = n - 2; k >= 0; --k) out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
    }

    // One raw UTF-8 sequence starting at pos_ (first byte >= 0x80), validated and copied.
    void utf8_sequence(std::string& out) {
        std::uint32_t cp = 0;
        std::size_t len = 0;
        const Utf8 r = decode_utf8(s_.substr(pos_), cp, len);
        if (r != Utf8::ok) fail(pos_, r == Utf8::truncated ? "truncated UTF-8 sequence" : "invalid UTF-8");
        out.append(s_.substr(pos_, len));
        pos_ += len;
    }

    std::string string() {
        const std::size_t start = pos_;
        ++pos_;  // '"'
        std::string out;
        for (;;) {
            if (at_end()) fail(start, "unterminated string");
            const unsigned char c = peek();
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) fail(pos_, fmt::format("raw control character {} in a string (escape it)", describe(c)));
            if (c >= 0x80) {
                utf8_sequence(out);
                continue;
            }
            if (c != '\\') {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            const std::size_t esc = pos_;
            ++pos_;
            if (at_end()) fail(esc, "unterminated escape");
            const unsigned char e = peek();
            ++pos_;
            static constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeaning = "\"\\/\b\f\n\r\t";
            if (const auto k = kEscaped.find(static_cast<char>(e)); k != std::string_view::npos) {
                out += kMeaning[k];
                continue;
            }
            if (e != 'u') fail(esc, fmt::format("invalid escape \\{}", describe(e)));
            std::uint32_t cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail(esc, "lone low surrogate in a \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (s_.substr(pos_, 2) != "\\u") fail(esc, "high surrogate without its low surrogate");
                pos_ += 2;
                const std::uint32_t lo = hex4();
                if (lo < 0xDC00 || lo > 0xDFFF) fail(esc, "high surrogate without its low surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
        }
    }
};

void serialize_to(std::string& out, const Value& v) {
    switch (v.kind()) {
        case Value::Kind::null:
            out += "null";
            return;
        case Value::Kind::boolean:
            out += v.as_bool() ? "true" : "false";
            return;
        case Value::Kind::integer:
            if (v.is_negative()) out += '-';
            out += fmt::format("{}", v.magnitude());
            return;
        case Value::Kind::number:
            out += fmt::format("{}", v.as_double());
            return;
        case Value::Kind::string:
            out += util::json_quote(v.as_string());
            return;
        case Value::Kind::array: {
            out += '[';
            const char* separator = "";
            for (const auto& item : v.as_array()) {
                out += std::exchange(separator, ",");
                serialize_to(out, item);
            }
            out += ']';
            return;
        }
        case Value::Kind::object: {
            out += '{';
            const char* separator = "";
            for (const auto& [k, item] : v.as_object()) {
                out += std::exchange(separator, ",");
                out += util::json_quote(k);
                out += ':';
                serialize_to(out, item);
            }
            out += '}';
            return;
        }
    }
}

}  // namespace

Value parse(std::string_view text, const Limits& limits) {
    return Parser(text, limits).document();
}

Value object(std::initializer_list<Member> members) {
    Object o(members);
    for (std::size_t i = 0; i < o.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (o[i].first == o[j].first)
                throw std::logic_error("json::object: duplicate key " + util::json_quote(o[i].first));
    return Value::object(std::move(o));
}

std::string serialize(const Value& v) {
    std::string out;
    serialize_to(out, v);
    return out;
}

}  // namespace fh::io::json
