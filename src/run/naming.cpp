/// @file naming.cpp
#include "run/naming.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "config/schema.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "report/runs.hpp"
#include "util/errors.hpp"
#include "util/xxh64.hpp"

namespace fh::run {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

bool safe_byte(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '+' || c == '-';
}

/// `<byte>` -> itself when in [A-Za-z0-9._+-], else %XX (upper-case hex).
std::string name_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        if (safe_byte(c))
            out += static_cast<char>(c);
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

/// A value as it appears in a name (before escaping).
std::string name_value(const config::KeyValue& v) {
    struct Visitor {
        std::string operator()(std::int64_t i) const { return fmt::format("{}", i); }
        std::string operator()(double d) const { return config::toml_value_text(d); }
        std::string operator()(bool b) const { return b ? "true" : "false"; }
        std::string operator()(const std::string& s) const { return s; }
        std::string operator()(const std::vector<std::int64_t>& a) const {
            return fmt::format("{}", fmt::join(a, "x"));
        }
    };
    return std::visit(Visitor{}, v);
}

/// `section.key=<value>` with the value escaped.
std::string setting_in_name(const config::Profile& p, const config::KeyDescriptor& k) {
    return k.full_name() + "=" + name_escape(name_value(config::get_value(p, k)));
}

/// `name`, or past kMaxDerivedNameBytes its head and '~' with the 16 hex digits of its XXH64.
std::string bounded(const std::string& name) {
    if (name.size() <= kMaxDerivedNameBytes) return name;
    const std::uint64_t h = util::xxh64(name.data(), name.size());
    std::size_t cut = kMaxDerivedNameBytes - 17;
    // Never cut inside a %XX escape.
    if (cut >= 1 && name[cut - 1] == '%')
        cut -= 1;
    else if (cut >= 2 && name[cut - 2] == '%')
        cut -= 2;
    return name.substr(0, cut) + fmt::format("~{:016x}", h);
}

/// Files and folders a run directory holds (docs/run-directory.md); anything else is not ours.
bool is_run_file(const std::string& name) {
    static const std::set<std::string> known{"config.toml", "metrics.jsonl", "eval.jsonl",      "summary.json",
                                             "checkpoints", "backtest",      "replay.fhreplay", "report.html"};
    // Temporary files of an interrupted atomic write: <file>.tmp-<pid>; a lock file.
    return known.count(name) > 0 || name.find(".tmp-") != std::string::npos || name.ends_with(".lock");
}

}  // namespace

std::string trim(std::string_view s, std::string_view blanks) {
    const auto b = s.find_first_not_of(blanks);
    if (b == std::string_view::npos) return "";
    const auto e = s.find_last_not_of(blanks);
    return std::string(s.substr(b, e - b + 1));
}

std::string derived_run_name(const config::Profile& p, const std::vector<std::string>& overrides) {
    std::map<std::string, const config::KeyDescriptor*> keys;  // sorted, each key once
    for (const auto& o : overrides) {
        const auto eq = o.find('=');
        const std::string full = trim(std::string_view(o).substr(0, eq));
        if (config::is_placement_key(full)) continue;
        const auto dot = full.find('.');
        if (dot == std::string::npos) continue;  // resolve() refused it already
        const auto* k = config::find_key(full.substr(0, dot), full.substr(dot + 1));
        if (k != nullptr) keys[full] = k;
    }
    std::string base = name_escape(p.run.name.empty() ? p.run.trainer : p.run.name);
    if (!base.empty() && (base[0] == '.' || base[0] == '-')) base = fmt::format("%{:02X}", base[0]) + base.substr(1);
    std::string name = base;
    for (const auto& [full, k] : keys) {
        name += ',';
        name += setting_in_name(p, *k);
    }
    name += fmt::format(",seed={}", p.run.seed);
    return bounded(name);
}

std::vector<std::string> agent_run_names(const std::vector<config::Profile>& agents) {
    std::map<std::string, const config::KeyDescriptor*> differing;  // sorted by full name
    for (const auto& k : config::schema()) {
        if (config::is_placement_key(k.full_name())) continue;
        std::set<std::string> values;
        for (const auto& a : agents) values.insert(name_value(config::get_value(a, k)));
        if (values.size() > 1) differing[k.full_name()] = &k;
    }
    std::vector<std::string> names;
    for (const auto& a : agents) {
        std::string name;
        for (const auto& [full, k] : differing) {
            name += setting_in_name(a, *k);
            name += ',';
        }
        names.push_back(bounded(name + fmt::format("seed={}", a.run.seed)));
    }
    return names;
}

std::string summary_status(const std::string& run_dir) {
    const json::Value v = read_json_or_null((fs::path(run_dir) / "summary.json").string());
    const auto* s = v.is_object() ? v.find("status") : nullptr;
    return s != nullptr && s->is_string() ? s->as_string() : "";
}

json::Value read_json_or_null(const std::string& path, std::size_t max_bytes) {
    try {
        return report::read_json(path, max_bytes);
    } catch (const std::exception&) {
        return {};
    }
}

Placement place_run(const config::Profile& p) {
    Placement out;
    if (p.run.name.empty()) return out;
    const fs::path dir = fs::path(p.run.output_dir) / p.run.name;
    std::error_code ec;
    if (!fs::exists(dir, ec)) return out;
    if (!fs::is_directory(dir, ec))
        throw UsageError(
            fmt::format("{} exists and is not a directory; remove it or choose another run.name", dir.string()));
    const std::string& mode = p.run.on_exists;
    if (mode == "new") {
        out.reason =
            fmt::format("{} exists (run.on_exists = \"new\"): a new directory is made beside it", dir.string());
        return out;
    }
    out.path = dir.string();
    out.status = summary_status(out.path);
    const std::string state = out.status.empty() ? "no summary.json" : "status " + out.status;
    if (mode == "error")
        throw UsageError(
            fmt::format("run directory {} exists ({}) and run.on_exists = \"error\"; remove it, rename the "
                        "run or set run.on_exists to new, skip or resume",
                        dir.string(), state));
    if (mode == "skip") {
        out.action = Placement::Action::skip;
        out.reason =
            fmt::format("run directory {} exists ({}): skipped (run.on_exists = \"skip\")", dir.string(), state);
        return out;
    }
    // resume
    if (out.status == "completed" || out.status == "early_stopped" || out.status == "diverged") {
        out.action = Placement::Action::skip;
        out.reason = fmt::format("run directory {} exists and finished ({}): skipped (run.on_exists = \"resume\")",
                                 dir.string(), state);
        return out;
    }
    if (fs::is_regular_file(dir / "checkpoints" / "last.safetensors", ec)) {
        out.action = Placement::Action::resume;
        out.reason =
            fmt::format("run directory {} exists ({}): resumed from its last checkpoint (run.on_exists = \"resume\")",
                        dir.string(), state);
        return out;
    }
    // Killed before its first checkpoint: start again, if the directory holds only run files and
    // no process runs there (one that has not written its first checkpoint yet holds the lock).
    const io::DirectoryLock lock(dir.string());
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (!is_run_file(name))
            throw UsageError(
                fmt::format("run directory {} has no checkpoint to resume from and holds {}, which is not a "
                            "run file; remove the directory to start the run again",
                            dir.string(), name));
    }
    fs::remove_all(dir, ec);
    if (ec) throw UsageError(fmt::format("cannot remove {} to start the run again: {}", dir.string(), ec.message()));
    out.action = Placement::Action::create;
    out.path.clear();
    out.reason = fmt::format("run directory {} had no checkpoint ({}): started again (run.on_exists = \"resume\")",
                             dir.string(), state);
    return out;
}

}  // namespace fh::run
