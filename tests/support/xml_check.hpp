/// @file xml_check.hpp
/// @brief A small strict well-formedness check for the HTML reports, which are written as XML
///        (XHTML-style): one root element, every element closed in order (void elements as
///        `<br/>`), attributes quoted and unique, only the five XML entities and numeric
///        character references, no stray `<` or `&`, no control characters, comments and a
///        `<!DOCTYPE html>` allowed. Returns "" when well-formed, else the first problem with its
///        line.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace fh::test {

inline std::string xml_problem(std::string_view s) {
    std::vector<std::string> open;
    std::size_t i = 0;
    int roots = 0;
    auto line = [&](std::size_t at) {
        std::size_t n = 1;
        for (std::size_t k = 0; k < at && k < s.size(); ++k) n += s[k] == '\n';
        return std::to_string(n);
    };
    auto name_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
    };
    auto check_reference = [&](std::size_t at) -> std::string {  // s[at] == '&'
        const auto semi = s.find(';', at);
        if (semi == std::string_view::npos || semi - at > 10) return "bare '&' at line " + line(at);
        const std::string_view ref = s.substr(at + 1, semi - at - 1);
        static const std::set<std::string_view> named{"amp", "lt", "gt", "quot", "apos"};
        if (named.count(ref)) return "";
        if (ref.size() >= 2 && ref[0] == '#') {
            const bool hex = ref[1] == 'x';
            if (ref.size() == (hex ? 2u : 1u)) return "empty character reference at line " + line(at);
            for (std::size_t k = hex ? 2 : 1; k < ref.size(); ++k)
                if (!(hex ? std::isxdigit(static_cast<unsigned char>(ref[k]))
                          : std::isdigit(static_cast<unsigned char>(ref[k]))))
                    return "bad character reference at line " + line(at);
            return "";
        }
        return "unknown entity &" + std::string(ref) + "; at line " + line(at);
    };
    while (i < s.size()) {
        const char c = s[i];
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\r' && c != '\t')
            return "control character at line " + line(i);
        if (c == '&') {
            if (auto p = check_reference(i); !p.empty()) return p;
            ++i;
            continue;
        }
        if (c == '>') {
            ++i;  // allowed in text by XML (we escape it anyway)
            continue;
        }
        if (c != '<') {
            if (open.empty() && !std::isspace(static_cast<unsigned char>(c)))
                return "text outside the root at line " + line(i);
            ++i;
            continue;
        }
        if (s.substr(i, 4) == "<!--") {
            const auto end = s.find("-->", i + 4);
            if (end == std::string_view::npos) return "unclosed comment at line " + line(i);
            i = end + 3;
            continue;
        }
        if (s.substr(i, 9) == "<!DOCTYPE") {
            if (roots > 0 || !open.empty()) return "DOCTYPE after the root at line " + line(i);
            const auto end = s.find('>', i);
            if (end == std::string_view::npos) return "unclosed DOCTYPE";
            i = end + 1;
            continue;
        }
        if (s.substr(i, 2) == "</") {
            std::size_t k = i + 2;
            while (k < s.size() && name_char(s[k])) ++k;
            const std::string name(s.substr(i + 2, k - i - 2));
            while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
            if (k >= s.size() || s[k] != '>') return "bad end tag at line " + line(i);
            if (open.empty() || open.back() != name)
                return "</" + name + "> does not close <" + (open.empty() ? std::string("nothing") : open.back()) +
                       "> at line " + line(i);
            open.pop_back();
            i = k + 1;
            continue;
        }
        // start tag
        std::size_t k = i + 1;
        while (k < s.size() && name_char(s[k])) ++k;
        const std::string name(s.substr(i + 1, k - i - 1));
        if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return "stray '<' at line " + line(i);
        std::set<std::string> attributes;
        bool self_closing = false;
        while (true) {
            while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
            if (k >= s.size()) return "unclosed tag <" + name + "> at line " + line(i);
            if (s[k] == '>') {
                ++k;
                break;
            }
            if (s.substr(k, 2) == "/>") {
                self_closing = true;
                k += 2;
                break;
            }
            const std::size_t a = k;
            while (k < s.size() && name_char(s[k])) ++k;
            const std::string attr(s.substr(a, k - a));
            if (attr.empty()) return "bad attribute in <" + name + "> at line " + line(k);
            if (!attributes.insert(attr).second) return "duplicate attribute " + attr + " at line " + line(k);
            if (k >= s.size() || s[k] != '=') return "attribute " + attr + " without a value at line " + line(k);
            ++k;
            if (k >= s.size() || (s[k] != '"' && s[k] != '\''))
                return "unquoted attribute " + attr + " at line " + line(k);
            const char q = s[k++];
            const auto end = s.find(q, k);
            if (end == std::string_view::npos) return "unclosed attribute value at line " + line(k);
            for (std::size_t m = k; m < end; ++m) {
                if (s[m] == '<') return "'<' in an attribute value at line " + line(m);
                if (s[m] == '&')
                    if (auto p = check_reference(m); !p.empty()) return p;
            }
            k = end + 1;
        }
        if (open.empty()) {
            if (++roots > 1) return "a second root element <" + name + "> at line " + line(i);
        }
        if (!self_closing) open.push_back(name);
        // <style> content is raw text in HTML: it must not hold '<' or '&' to be XML as well.
        if (!self_closing && name == "style") {
            const auto end = s.find("</style>", k);
            if (end == std::string_view::npos) return "unclosed <style>";
            if (s.substr(k, end - k).find_first_of("<&") != std::string_view::npos) return "'<' or '&' in <style>";
            k = end;
        }
        i = k;
    }
    if (!open.empty()) return "<" + open.back() + "> is never closed";
    if (roots != 1) return "no root element";
    return "";
}

}  // namespace fh::test
