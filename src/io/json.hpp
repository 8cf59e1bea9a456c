/// @file json.hpp
/// @brief A small, strict, bounded JSON reader (RFC 8259 minus fractions and exponents) and the
///        matching compact writer, used for safetensors headers (docs/checkpoints.md).
///
/// Accepted: objects, arrays, strings (all escapes, \uXXXX with surrogate pairs, valid UTF-8
/// only, no raw control characters), integers (-2^63 .. 2^64-1, no leading zeros), true, false,
/// null, whitespace. Refused with the byte offset: numbers with a fraction or an exponent,
/// duplicate object keys, nesting deeper than Limits::max_depth, input larger than
/// Limits::max_bytes, trailing characters. Object members keep their order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
    enum class Kind { null, boolean, integer, string, array, object };

    Value() = default;  ///< null
    static Value boolean(bool b);
    static Value integer(bool negative, std::uint64_t magnitude);
    static Value string(std::string s);
    static Value array(Array a);
    static Value object(Object o);

    Kind kind() const noexcept { return kind_; }
    bool is_null() const noexcept { return kind_ == Kind::null; }
    bool is_integer() const noexcept { return kind_ == Kind::integer; }
    bool is_string() const noexcept { return kind_ == Kind::string; }
    bool is_array() const noexcept { return kind_ == Kind::array; }
    bool is_object() const noexcept { return kind_ == Kind::object; }

    /// Accessors throw std::logic_error on the wrong kind (callers check kind() first).
    bool as_bool() const;
    bool is_negative() const;             ///< integer only
    std::uint64_t magnitude() const;      ///< integer: |value|
    std::uint64_t as_u64() const;         ///< integer >= 0
    std::int64_t as_i64() const;          ///< integer within int64 (logic_error otherwise)
    const std::string& as_string() const;
    const Array& as_array() const;
    const Object& as_object() const;
    /// Object member by key, or nullptr.
    const Value* find(std::string_view key) const;

private:
    Kind kind_ = Kind::null;
    bool bool_ = false;
    bool negative_ = false;
    std::uint64_t magnitude_ = 0;
    std::string string_;
    std::shared_ptr<const Array> array_;    // immutable once built; shared on copy
    std::shared_ptr<const Object> object_;
};

/// Name of a kind ("object", "integer", ...) for error messages.
const char* kind_name(Value::Kind k) noexcept;

struct Limits {
    std::size_t max_bytes = 100'000'000;  ///< the safetensors header limit
    int max_depth = 64;                   ///< nested arrays/objects
};

/// Parses exactly one JSON value (surrounded by optional whitespace). Throws ParseError.
Value parse(std::string_view text, const Limits& limits = {});

/// Compact serialisation, as serde_json writes it (no spaces; strings escape `"` `\` and
/// control characters, `\b \f \n \r \t` short, others `\u00xx`; non-ASCII as raw UTF-8).
std::string quote(std::string_view s);
std::string serialize(const Value& v);

}  // namespace fh::io::json
