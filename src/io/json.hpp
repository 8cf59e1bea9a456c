/// @file json.hpp
/// @brief The one JSON reader and writer of the program: a small, strict, bounded reader
///        (safetensors headers, summary.json) and the compact writer every JSON output goes
///        through (metrics.jsonl, eval.jsonl, summary.json, bench, eval, JSON log lines), so
///        strings are escaped in one place and non-finite numbers are always written as null.
///
/// Accepted: objects, arrays, strings (all escapes, \uXXXX with surrogate pairs, valid UTF-8
/// only, no raw control characters), integers (-2^63 .. 2^64-1, no leading zeros), numbers with
/// a fraction or an exponent only when Limits::allow_fractions (safetensors headers refuse
/// them), true, false, null, whitespace. Refused with the byte offset: duplicate object keys,
/// nesting deeper than Limits::max_depth, input larger than Limits::max_bytes, trailing
/// characters. Object members keep their order.
///
/// Writing: build a Value (its constructors take numbers, strings and booleans directly; `object`
/// takes `{key, value}` pairs in order) and `serialize` it:
///     json::serialize(json::object({{"step", 12}, {"loss", 0.25}, {"trainer", "dqn"}}))
///     == R"({"step":12,"loss":0.25,"trainer":"dqn"})"
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/json_string.hpp"

namespace fh::io::json {

/// A parse error; what() reads "at byte N: message".
class ParseError : public std::runtime_error {
public:
    ParseError(std::size_t offset, const std::string& message);
    std::size_t offset() const noexcept { return offset_; }
    /// The message without the offset prefix.
    const std::string& reason() const noexcept { return reason_; }

private:
    std::size_t offset_;
    std::string reason_;
};

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;  ///< in document order; keys are unique

class Value {
public:
    enum class Kind { null, boolean, integer, number, string, array, object };

    Value() = default;  ///< null
    static Value boolean(bool b);
    static Value integer(bool negative, std::uint64_t magnitude);
    /// A floating-point number; NaN and infinities become null (JSON has no such numbers).
    static Value number(double d);
    static Value string(std::string s);
    static Value array(Array a);
    static Value object(Object o);

    // Conversions for writing: {"key", 3}, {"key", 0.5}, {"key", "text"}, {"key", true}.
    Value(std::nullptr_t) {}
    template <class B>
    requires std::same_as<B, bool> Value(B b) : Value(boolean(b)) {}
    template <std::integral I>
    requires(!std::same_as<I, bool> && !std::same_as<I, char>) Value(I i)
        : Value(integer(i < 0, i < 0 ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i))) {}
    template <std::floating_point F>
    Value(F d) : Value(number(static_cast<double>(d))) {}
    Value(const char* s) : Value(string(std::string(s))) {}
    Value(std::string_view s) : Value(string(std::string(s))) {}
    Value(const std::string& s) : Value(string(s)) {}
    /// A number, or null when empty.
    template <std::floating_point F>
    Value(std::optional<F> d) : Value(d ? number(*d) : Value()) {}

    Kind kind() const noexcept { return kind_; }
    bool is_null() const noexcept { return kind_ == Kind::null; }
    bool is_integer() const noexcept { return kind_ == Kind::integer; }
    /// An integer or a floating-point number.
    bool is_number() const noexcept { return kind_ == Kind::integer || kind_ == Kind::number; }
    bool is_string() const noexcept { return kind_ == Kind::string; }
    bool is_array() const noexcept { return kind_ == Kind::array; }
    bool is_object() const noexcept { return kind_ == Kind::object; }

    /// Accessors throw std::logic_error on the wrong kind (callers check kind() first).
    bool as_bool() const { return expect(Kind::boolean).bool_; }
    bool is_negative() const { return expect(Kind::integer).negative_; }          ///< integer only
    std::uint64_t magnitude() const { return expect(Kind::integer).magnitude_; }  ///< integer: |value|
    std::uint64_t as_u64() const;                                                 ///< integer >= 0
    std::int64_t as_i64() const;  ///< integer within int64 (logic_error otherwise)
    double as_double() const;     ///< integer or number
    const std::string& as_string() const { return expect(Kind::string).string_; }
    const Array& as_array() const { return *expect(Kind::array).array_; }
    const Object& as_object() const { return *expect(Kind::object).object_; }
    /// Object member by key, or nullptr.
    const Value* find(std::string_view key) const;

private:
    explicit Value(Kind k) : kind_(k) {}
    /// *this, or std::logic_error when it is not of kind `k`.
    const Value& expect(Kind k) const;

    Kind kind_ = Kind::null;
    bool bool_ = false;
    bool negative_ = false;
    std::uint64_t magnitude_ = 0;
    double number_ = 0;
    std::string string_;
    std::shared_ptr<const Array> array_;  // immutable once built; shared on copy
    std::shared_ptr<const Object> object_;
};

/// Name of a kind ("object", "integer", ...) for error messages.
const char* kind_name(Value::Kind k) noexcept;

struct Limits {
    std::size_t max_bytes = 100'000'000;  ///< the safetensors header limit
    int max_depth = 64;                   ///< nested arrays/objects
    bool allow_fractions = false;         ///< numbers like 0.5 and 1e-3 (summary.json); not in headers
};

/// Parses exactly one JSON value (surrounded by optional whitespace). Throws ParseError.
Value parse(std::string_view text, const Limits& limits = {});

/// An object from `{key, value}` pairs, in order (keys must be unique; checked).
Value object(std::initializer_list<Member> members);
/// An array of numbers (histograms, per-feature values).
template <class T>
Value array_of(std::span<const T> items) {
    Array a;
    a.reserve(items.size());
    for (const T& x : items) a.emplace_back(x);
    return Value::array(std::move(a));
}

/// Compact serialisation, as serde_json writes it (no spaces; strings escape `"` `\` and
/// control characters, `\b \f \n \r \t` short, others `\u00xx`; non-ASCII as raw UTF-8;
/// floating-point numbers in the shortest form that reads back exactly).
std::string serialize(const Value& v);

}  // namespace fh::io::json
