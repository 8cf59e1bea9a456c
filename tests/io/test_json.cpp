/// @file test_json.cpp
/// @brief The strict JSON reader behind safetensors headers: accepted forms, refusals with
///        offsets, bounds, and the serde_json-compatible writer.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <chrono>
#include <string>
#include <vector>

#include "io/json.hpp"

using namespace fh::io;

namespace {
std::string reason_of(const std::string& text, const json::Limits& limits = {}) {
    try {
        json::parse(text, limits);
    } catch (const json::ParseError& e) {
        return e.reason();
    }
    return "<accepted>";
}
}  // namespace

TEST_CASE("json: values of every kind", "[io][json]") {
    const auto v = json::parse(R"( { "a" : [1, -2, 0, true, false, null, "x"], "b": {}, "c": [] } )");
    REQUIRE(v.is_object());
    const auto& o = v.as_object();
    REQUIRE(o.size() == 3);
    CHECK(o[0].first == "a");  // document order kept
    CHECK(o[1].first == "b");
    const auto& a = v.find("a")->as_array();
    REQUIRE(a.size() == 7);
    CHECK(a[0].as_u64() == 1);
    CHECK(a[1].as_i64() == -2);
    CHECK(a[1].is_negative());
    CHECK_FALSE(a[2].is_negative());
    CHECK(a[3].as_bool());
    CHECK_FALSE(a[4].as_bool());
    CHECK(a[5].is_null());
    CHECK(a[6].as_string() == "x");
    CHECK(v.find("b")->as_object().empty());
    CHECK(v.find("c")->as_array().empty());
    CHECK(v.find("zz") == nullptr);
    CHECK_THROWS_AS(a[6].as_u64(), std::logic_error);
    CHECK(json::parse("\t\r\n 7 \n").as_u64() == 7);
    // Each kind's name, as the errors give it.
    const json::Value number(1.5);  // the writer's (the parser reads integers only)
    const std::pair<const json::Value*, std::string> named[] = {
        {&a[5], "null"},   {&a[3], "boolean"},     {&a[0], "integer"},     {&number, "number"},
        {&a[6], "string"}, {v.find("c"), "array"}, {v.find("b"), "object"}};
    for (const auto& [value, name] : named) CHECK(json::kind_name(value->kind()) == name);
}

TEST_CASE("json: integer range and forms", "[io][json]") {
    CHECK(json::parse("18446744073709551615").as_u64() == 18446744073709551615ull);
    CHECK(json::parse("-9223372036854775808").as_i64() == INT64_MIN);
    CHECK(json::parse("9223372036854775807").as_i64() == INT64_MAX);
    CHECK(json::parse("-0").as_u64() == 0);
    CHECK(reason_of("18446744073709551616") == "integer out of range");
    CHECK(reason_of("-9223372036854775809") == "integer out of range");
    CHECK(reason_of("01") == "leading zeros are not allowed");
    CHECK(reason_of("-") == "expected a digit");
    CHECK(reason_of("1.5").find("fraction or an exponent") != std::string::npos);
    CHECK(reason_of("1e3").find("fraction or an exponent") != std::string::npos);
    CHECK(reason_of("+1").find("unexpected '+'") != std::string::npos);
    CHECK_THROWS_AS(json::parse("18446744073709551615").as_i64(), std::logic_error);
    CHECK_THROWS_AS(json::parse("-1").as_u64(), std::logic_error);
}

TEST_CASE("json: strings, escapes and UTF-8", "[io][json]") {
    CHECK(json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
    CHECK(json::parse(R"("\u00e9\u20AC")").as_string() == "\xC3\xA9\xE2\x82\xAC");
    CHECK(json::parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");
    CHECK(json::parse("\"\xC3\xA9\xF0\x9F\x98\x80\"").as_string() == "\xC3\xA9\xF0\x9F\x98\x80");
    CHECK(json::parse(R"("\u0000")").as_string() == std::string(1, '\0'));
    CHECK(reason_of(R"("\ud83d")") == "high surrogate without its low surrogate");
    CHECK(reason_of(R"("\ud83dx")") == "high surrogate without its low surrogate");
    CHECK(reason_of(R"("\ude00")") == "lone low surrogate in a \\u escape");
    CHECK(reason_of(R"("\u12G4")").find("invalid hex digit") != std::string::npos);
    CHECK(reason_of(R"("\u12")") == "truncated \\u escape");
    CHECK(reason_of(R"("\x")").find("invalid escape") != std::string::npos);
    CHECK(reason_of("\"a\nb\"").find("raw control character") != std::string::npos);
    CHECK(reason_of("\"abc") == "unterminated string");
    CHECK(reason_of("\"\xC3\"") == "invalid UTF-8");              // sequence cut short
    CHECK(reason_of("\"\xC0\xAF\"") == "invalid UTF-8");          // overlong '/'
    CHECK(reason_of("\"\xED\xA0\x80\"") == "invalid UTF-8");      // encoded surrogate
    CHECK(reason_of("\"\xF4\x90\x80\x80\"") == "invalid UTF-8");  // above U+10FFFF
    CHECK(reason_of("\"\x80\"") == "invalid UTF-8");
}

TEST_CASE("json: structural errors carry the byte offset", "[io][json]") {
    try {
        json::parse(R"({"a":1,})");
        FAIL("accepted a trailing comma");
    } catch (const json::ParseError& e) {
        CHECK(e.offset() == 7);
        CHECK(e.reason() == "expected a string key in the object");
        CHECK(std::string(e.what()) == "at byte 7: expected a string key in the object");
    }
    CHECK(reason_of("") == "unexpected end of input, expected a value");
    CHECK(reason_of("   ") == "unexpected end of input, expected a value");
    CHECK(reason_of("[1,]").find("unexpected ']'") != std::string::npos);
    CHECK(reason_of("[1 2]").find("expected ',' or ']'") != std::string::npos);
    CHECK(reason_of("{\"a\" 1}") == "expected ':' after the object key");
    CHECK(reason_of("{\"a\":1 \"b\":2}").find("expected ',' or '}'") != std::string::npos);
    CHECK(reason_of("{\"a\":1,\"a\":2}") == "duplicate key \"a\"");
    CHECK(reason_of("{1:2}") == "expected a string key in the object");
    CHECK(reason_of("{} x") == "trailing characters after the JSON value");
    CHECK(reason_of("{}{}") == "trailing characters after the JSON value");
    CHECK(reason_of("[") == "unexpected end of input, expected a value");
    CHECK(reason_of("[1") == "unexpected end of input inside an array");
    CHECK(reason_of("{\"a\":1") == "unexpected end of input inside an object");
    CHECK(reason_of("tru") == "invalid literal, expected true");
    CHECK(reason_of("nul") == "invalid literal, expected null");
    CHECK(reason_of("\x01").find("byte 0x01") != std::string::npos);
}

TEST_CASE("json: depth and size bounds", "[io][json]") {
    const json::Limits limits{1000, 8};
    CHECK_NOTHROW(json::parse(std::string(8, '[') + std::string(8, ']'), limits));
    CHECK(reason_of(std::string(9, '[') + std::string(9, ']'), limits) == "nesting deeper than 8 levels");
    CHECK(reason_of(std::string(100000, '['), {}) == "nesting deeper than 64 levels");  // no stack overflow
    CHECK(reason_of(std::string(1001, ' ') + "1", limits).find("exceeds the limit of 1000 bytes") != std::string::npos);
}

TEST_CASE("json: compact serialisation as serde_json writes it", "[io][json]") {
    const std::string text =
        R"({"a":[1,-2,0,true,false,null,"x\"y\\z\n\t\b\f\r\u001f/é"],"b":{},"c":[],"d":18446744073709551615})";
    CHECK(json::serialize(json::parse(text)) == text);
    CHECK(json::serialize(json::parse(" { \"k\" : [ 1 , 2 ] } ")) == "{\"k\":[1,2]}");
    CHECK(fh::util::json_quote("a\x01") == "\"a\\u0001\"");
    CHECK(json::serialize(json::parse("-9223372036854775808")) == "-9223372036854775808");
}

TEST_CASE("json: the writer builds objects in order; non-finite numbers are null", "[io][json]") {
    const std::vector<unsigned long long> hist{3, 0, 7};
    const auto v = json::object({{"step", 12},
                                 {"neg", -5LL},
                                 {"loss", 0.25},
                                 {"tiny", 3e-4},
                                 {"nan", std::nan("")},
                                 {"inf", -std::numeric_limits<double>::infinity()},
                                 {"none", std::optional<double>()},
                                 {"some", std::optional<double>(1.5)},
                                 {"name", "dqn \"x\"\n"},
                                 {"ok", true},
                                 {"hist", json::array_of<unsigned long long>(hist)},
                                 {"nested", json::object({{"a", 1}})}});
    CHECK(json::serialize(v) ==
          R"({"step":12,"neg":-5,"loss":0.25,"tiny":0.0003,"nan":null,"inf":null,"none":null,"some":1.5,)"
          R"("name":"dqn \"x\"\n","ok":true,"hist":[3,0,7],"nested":{"a":1}})");
    CHECK_THROWS_AS(json::object({{"a", 1}, {"a", 2}}), std::logic_error);
    // Every double reads back exactly.
    for (double d : {0.1, 1.0 / 3.0, 1e-300, 6.02214076e23, -2.5e-7, 123456789.125}) {
        const auto back = json::parse(json::serialize(json::Value(d)), json::Limits{1000, 8, true});
        CHECK(back.as_double() == d);
    }
}

TEST_CASE("json: fractions and exponents only where allowed", "[io][json]") {
    const json::Limits with{1000, 8, true};
    CHECK(reason_of("0.5").find("fraction or an exponent") != std::string::npos);
    CHECK(json::parse("0.5", with).as_double() == 0.5);
    CHECK(json::parse("-1.25e2", with).as_double() == -125.0);
    CHECK(json::parse("1E-3", with).as_double() == 1e-3);
    CHECK(json::parse("7", with).is_integer());
    CHECK(json::parse("7", with).as_double() == 7.0);
    CHECK(reason_of("1.", with) == "expected a digit");
    CHECK(reason_of("1e", with) == "expected a digit");
    CHECK(reason_of("1e+", with) == "expected a digit");
    CHECK(reason_of("1e999", with) == "number out of range");
    CHECK(reason_of(".5", with).find("expected a value") != std::string::npos);
}

TEST_CASE("json: duplicate keys are found in O(n log n): 200,000 keys in well under a second", "[io][json]") {
    // The previous check compared each key with every earlier one: 200,000 keys took tens of
    // seconds (1M tensors in a 75 MB safetensors header took minutes).
    std::string text = "{";
    for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    text += "}";
    const auto t0 = std::chrono::steady_clock::now();
    const auto v = json::parse(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(v.as_object().size() == 200000);
    CHECK(s < 5.0);
    // A duplicate anywhere is still refused, at the first repeated key in document order.
    std::string dup = text.substr(0, text.size() - 1) + ",\"k5\":1,\"k3\":2}";
    try {
        json::parse(dup);
        FAIL("accepted a duplicate key");
    } catch (const json::ParseError& e) {
        CHECK(e.reason() == "duplicate key \"k5\"");
        CHECK(e.offset() == dup.rfind("\"k5\""));
    }
    CHECK(reason_of(R"({"b":1,"a":2,"b":3,"a":4})") == "duplicate key \"b\"");
    CHECK(reason_of(R"({"a":{"x":1,"x":2}})") == "duplicate key \"x\"");
}
