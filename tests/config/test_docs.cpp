/// @file test_docs.cpp
/// @brief docs/profiles.md and the schema agree: every key with its type, default, range and
///        meaning. `foxhunt-tests "[.docs-generate]"` rewrites the tables from the schema.
///        Every doc is reachable from docs/README.md, and every relative link and `docs/*.md`
///        mention in the docs points to a file (and heading) that exists.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "build_config.hpp"
#include "config/schema.hpp"
#include "support.hpp"

namespace {

using Row = std::vector<std::string>;  // key, type, default, range, meaning

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(' ');
    const auto e = s.find_last_not_of(' ');
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string strip_ticks(std::string s) {
    if (s.size() >= 2 && s.front() == '`' && s.back() == '`') s = s.substr(1, s.size() - 2);
    return s;
}

Row expected_row(const fh::config::KeyDescriptor& k) {
    const fh::config::Profile defaults;
    return {std::string(k.key), std::string(fh::config::type_name(k.type)),
            k.required ? "(required)" : fh::config::toml_value_text(fh::config::get_value(defaults, k)), k.range_text(),
            std::string(k.doc)};
}

std::string markdown_row(const Row& r) {
    return "| `" + r[0] + "` | " + r[1] + " | `" + r[2] + "` | " + r[3] + " | " + r[4] + " |";
}

std::string source_dir() {
    const char* s = std::getenv("FH_SOURCE_DIR");
    return s != nullptr ? s : FH_SOURCE_DIR;
}

std::string docs_path() {
    return source_dir() + "/docs/profiles.md";
}

/// section -> rows, from the "## [section]" headings and the table rows under them.
std::map<std::string, std::vector<Row>> parse_docs(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::map<std::string, std::vector<Row>> out;
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.rfind("## [", 0) == 0) {
            section = line.substr(4, line.find(']') - 4);
            out[section];
            continue;
        }
        if (section.empty() || line.rfind("| `", 0) != 0) continue;
        Row cells;
        std::stringstream ss(line.substr(1));
        std::string cell;
        while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
        if (!cells.empty() && cells.back().empty()) cells.pop_back();
        for (int i : {0, 2})
            if (static_cast<int>(cells.size()) > i) cells[i] = strip_ticks(cells[i]);
        out[section].push_back(cells);
    }
    return out;
}

}  // namespace

TEST_CASE("docs/profiles.md lists every key exactly as the schema does", "[config]") {
    const auto docs = parse_docs(docs_path());
    std::size_t rows = 0;
    for (const auto& [section, list] : docs) {
        INFO("section [" << section << "] in docs/profiles.md");
        CHECK(fh::config::is_section(section));
        rows += list.size();
    }
    for (const auto& s : fh::config::sections()) {
        const auto it = docs.find(std::string(s.name));
        INFO("section [" << s.name << "]");
        REQUIRE(it != docs.end());
        std::vector<Row> want;
        for (const auto& k : fh::config::schema())
            if (k.section == s.name) want.push_back(expected_row(k));
        const auto& have = it->second;
        CHECK(have.size() == want.size());
        for (std::size_t i = 0; i < std::min(have.size(), want.size()); ++i) {
            INFO("expected: " << markdown_row(want[i]));
            INFO("found:    " << markdown_row(have[i].size() == 5 ? have[i] : Row(5, "?")));
            CHECK(have[i] == want[i]);
        }
    }
    CHECK(rows == fh::config::schema().size());
}

namespace {

/// "# Keys" and every section's table, exactly as docs/profiles.md must end.
std::string keys_part() {
    std::ostringstream out;
    out << "# Keys\n";
    for (const auto& s : fh::config::sections()) {
        out << "\n## [" << s.name << "]\n\n"
            << s.doc << ".\n\n"
            << "| key | type | default | range | meaning |\n|---|---|---|---|---|\n";
        for (const auto& k : fh::config::schema())
            if (k.section == s.name) out << markdown_row(expected_row(k)) << "\n";
    }
    return out.str();
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("docs/profiles.md ends with the key tables and nothing else", "[config]") {
    // The tables were once pasted with the test runner's summary below them.
    const std::string text = read_all(docs_path());
    const auto at = text.find("\n# Keys\n");
    REQUIRE(at != std::string::npos);
    CHECK(text.substr(at + 1) == keys_part());
}

TEST_CASE("rewrite the key tables of docs/profiles.md from the schema", "[.docs-generate]") {
    // Rewrites everything from "# Keys" to the end of the file (run it after changing a key).
    const std::string text = read_all(docs_path());
    const auto at = text.find("\n# Keys\n");
    REQUIRE(at != std::string::npos);
    std::ofstream(docs_path(), std::ios::binary) << text.substr(0, at + 1) << keys_part();
    std::cout << "rewrote " << docs_path() << "\n";
}

namespace {

namespace fs = std::filesystem;

/// The Markdown files the links are checked in: README.md, docs/*.md and bench/README.md.
std::vector<fs::path> markdown_files() {
    const fs::path root = source_dir();
    std::vector<fs::path> out{root / "README.md"};
    for (const auto& e : fs::directory_iterator(root / "docs"))
        if (e.path().extension() == ".md") out.push_back(e.path());
    if (fs::exists(root / "bench" / "README.md")) out.push_back(root / "bench" / "README.md");
    std::sort(out.begin(), out.end());
    return out;
}

/// GitHub's anchor of a heading: lower case, spaces to '-', other ASCII punctuation dropped
/// (non-ASCII bytes kept); a repeated heading gets "-1", "-2", ...
std::vector<std::string> anchors(const std::string& text) {
    std::vector<std::string> out;
    std::map<std::string, int> seen;
    std::istringstream in(text);
    std::string line;
    bool fenced = false;
    while (std::getline(in, line)) {
        if (line.rfind("```", 0) == 0) fenced = !fenced;
        if (fenced || line.empty() || line[0] != '#') continue;
        const auto start = line.find_first_not_of('#');
        if (start == std::string::npos || line[start] != ' ') continue;
        std::string slug;
        for (const char c : trim(line.substr(start))) {
            const auto u = static_cast<unsigned char>(c);
            if (u >= 0x80 || std::isalnum(u) != 0 || c == '_' || c == '-')
                slug += static_cast<char>(std::tolower(u));
            else if (c == ' ')
                slug += '-';
        }
        const int n = seen[slug]++;
        out.push_back(n == 0 ? slug : slug + "-" + std::to_string(n));
    }
    return out;
}

/// The targets of the inline links `](target)` outside code fences.
std::vector<std::string> link_targets(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    bool fenced = false;
    while (std::getline(in, line)) {
        if (line.rfind("```", 0) == 0) fenced = !fenced;
        if (fenced) continue;
        for (auto at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
            const auto end = line.find(')', at + 2);
            if (end != std::string::npos) out.push_back(line.substr(at + 2, end - at - 2));
        }
    }
    return out;
}

}  // namespace

TEST_CASE("docs/README.md links every doc", "[config][docs]") {
    const fs::path docs = fs::path(source_dir()) / "docs";
    const std::string index = read_all((docs / "README.md").string());
    REQUIRE(!index.empty());
    std::vector<std::string> linked;
    for (const auto& t : link_targets(index)) linked.push_back(t.substr(0, t.find('#')));
    int n = 0;
    for (const auto& e : fs::directory_iterator(docs)) {
        const auto name = e.path().filename().string();
        if (e.path().extension() != ".md" || name == "README.md") continue;
        ++n;
        INFO("docs/" << name << " is not linked from docs/README.md");
        CHECK(std::find(linked.begin(), linked.end(), name) != linked.end());
    }
    CHECK(n >= 10);
}

TEST_CASE("every relative link in the docs points to an existing file and heading", "[config][docs]") {
    int checked = 0;
    for (const auto& file : markdown_files()) {
        const std::string text = read_all(file.string());
        for (const auto& target : link_targets(text)) {
            if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
            INFO(file.string() << ": link (" << target << ")");
            const auto hash = target.find('#');
            const std::string path = target.substr(0, hash);
            const fs::path resolved = path.empty() ? file : file.parent_path() / path;
            REQUIRE(fs::exists(resolved));
            ++checked;
            if (hash == std::string::npos || resolved.extension() != ".md") continue;
            const auto list = anchors(read_all(resolved.string()));
            CHECK(std::find(list.begin(), list.end(), target.substr(hash + 1)) != list.end());
        }
    }
    CHECK(checked >= 20);
}

TEST_CASE("every docs/NAME.md the docs mention exists", "[config][docs]") {
    // Most cross-references are prose (docs/sweeps.md, "Population"), not links.
    const fs::path root = source_dir();
    for (const auto& file : markdown_files()) {
        const std::string text = read_all(file.string());
        for (auto at = text.find("docs/"); at != std::string::npos; at = text.find("docs/", at + 5)) {
            auto end = at + 5;
            while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '-' ||
                                         text[end] == '_' || text[end] == '.'))
                ++end;
            std::string name = text.substr(at, end - at);
            while (!name.empty() && name.back() == '.') name.pop_back();
            if (name.size() < 3 || name.compare(name.size() - 3, 3, ".md") != 0) continue;
            INFO(file.string() << " mentions " << name);
            CHECK(fs::exists(root / name));
        }
    }
}

TEST_CASE("docs/profiles.md's rules name only schema keys, and the refusals they list are refused", "[config]") {
    // The prose above the generated tables is written by hand: it must not drift from the
    // resolver (it once said dqn.her was refused after it was implemented).
    std::ifstream in(docs_path());
    REQUIRE(in);
    std::string prose, line;
    while (std::getline(in, line) && line.rfind("# Keys", 0) != 0) prose += line + "\n";
    // Every `section.key` it names exists.
    std::size_t named = 0;
    for (std::size_t at = prose.find('`'); at != std::string::npos; at = prose.find('`', at + 1)) {
        const auto end = prose.find('`', at + 1);
        if (end == std::string::npos) break;
        const std::string token = prose.substr(at + 1, end - at - 1);
        at = end;
        const auto dot = token.find('.');
        if (dot == std::string::npos || !fh::config::is_section(token.substr(0, dot))) continue;
        std::string key = token.substr(dot + 1);
        key = key.substr(0, key.find_first_of(" =<>+*/)["));
        INFO(token);
        CHECK(fh::config::find_key(token.substr(0, dot), key) != nullptr);
        ++named;
    }
    CHECK(named > 40);
    // The "not implemented yet" bullet lists `key = value` pairs, and each is refused for every trainer.
    const auto start = prose.find("- Not implemented yet, so refused");
    REQUIRE(start != std::string::npos);
    auto stop = prose.find("\n- ", start + 1);
    const std::string bullet = prose.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
    std::size_t refusals = 0;
    for (std::size_t at = bullet.find('`'); at != std::string::npos; at = bullet.find('`', at + 1)) {
        const auto end = bullet.find('`', at + 1);
        if (end == std::string::npos) break;
        const std::string token = bullet.substr(at + 1, end - at - 1);
        at = end;
        const auto eq = token.find(" = ");
        INFO("docs/profiles.md refuses `" << token << "`: write it as `key = value`");
        REQUIRE(eq != std::string::npos);
        const std::string key = token.substr(0, eq), value = token.substr(eq + 3);
        for (const std::string trainer : {"dqn", "ppo", "iql", "supervised", "dt"}) {
            const auto o = fh::test::resolve("[run]\ntrainer = \"" + trainer + "\"\n", {key + "=" + value});
            INFO(trainer);
            CHECK(!o.ok);
            CHECK(o.message.find(key) != std::string::npos);
        }
        ++refusals;
    }
    CHECK(refusals >= 1);
}
