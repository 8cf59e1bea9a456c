/// @file resolve.cpp
/// @brief Profile resolution: defaults < profile < command line, then validation of every key
///        and of the cross-key rules. Every problem is collected, none stops the others.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "config/toml_reader.hpp"
#include "config/trainer_profiles.hpp"
#include "util/regular_file.hpp"

namespace fh::config {
namespace {

std::string join_problems(const std::vector<std::string>& problems) {
    std::string s;
    for (const auto& p : problems) s += p + "\n";
    s += fmt::format(
        "({} problem{} in the profile; docs/profiles.md lists every key, and "
        "`foxhunt-train check PROFILE` prints the resolved profile)",
        problems.size(), problems.size() == 1 ? "" : "s");
    return s;
}

bool is_string_key(std::string_view section, std::string_view key) {
    const auto* d = find_key(section, key);
    return d != nullptr && d->type == KeyType::string;
}

std::vector<std::string> section_names() {
    std::vector<std::string> out;
    for (const auto& s : sections()) out.emplace_back(s.name);
    return out;
}

/// The `out` of every schema key whose `by` is `value`: the keys of a section, the sections that
/// have a key of a name.
std::vector<std::string> schema_names(std::string_view KeyDescriptor::*by, std::string_view value,
                                      std::string_view KeyDescriptor::*out) {
    std::vector<std::string> names;
    for (const auto& k : schema())
        if (k.*by == value) names.emplace_back(k.*out);
    return names;
}
std::vector<std::string> keys_of(std::string_view section) {
    return schema_names(&KeyDescriptor::section, section, &KeyDescriptor::key);
}
std::vector<std::string> owners_of(std::string_view key) {
    return schema_names(&KeyDescriptor::key, key, &KeyDescriptor::section);
}

/// "a", "a and b", "a, b and c" (`last` = "and"; "or" likewise).
std::string words(const std::vector<std::string>& items, std::string_view last) {
    if (items.size() < 2) return items.empty() ? "" : items.front();
    return fmt::format("{} {} {}", fmt::join(items.begin(), items.end() - 1, ", "), last, items.back());
}

/// The trainers with `capability` as run.trainer's values: "\"dqn\"", "\"dqn\" or \"iql\"", ...
std::string quoted_trainers_with(bool TrainerProfile::*capability) {
    std::vector<std::string> names;
    for (const auto name : trainers_with(capability)) names.push_back(toml_quote(name));
    return words(names, "or");
}

class Resolver {
public:
    /// stored: the text is a profile foxhunt-train wrote (kResolvedProfileHeader).
    Resolver(std::string_view origin, bool stored) : origin_(origin), stored_(stored) {}

    void apply_document(const TomlValue& root) {
        for (std::size_t i = 0; i < root.items.size(); ++i) {
            const auto& name = root.keys[i];
            const auto& value = root.items[i];
            const auto& where = root.key_where[i];
            if (value.kind != TomlValue::Kind::table) {
                const auto owners = owners_of(name);
                if (!owners.empty())
                    problem(where, fmt::format("'{}' is outside any section; it belongs under [{}] "
                                               "(put it after a [{}] line)",
                                               name, owners.front(), owners.front()));
                else if (is_section(name))
                    problem(where, fmt::format("[{}] must be a table (a [{}] header followed by keys), not {}", name,
                                               name, kind_phrase(value.kind)));
                else
                    problem(where,
                            fmt::format("unknown key '{}' outside any section{}", name, suggestion_for_section(name)));
                continue;
            }
            if (!is_section(name)) {
                problem(value.where.line > 0 ? value.where : where,
                        fmt::format("unknown section [{}]{}", name, suggestion_for_section(name)));
                continue;
            }
            if (name == "run" && value.where.line > 0) run_header_ = value.where;
            for (std::size_t j = 0; j < value.items.size(); ++j)
                apply_value(name, value.keys[j], value.items[j], value.key_where[j], false);
        }
    }

    void apply_overrides(const std::vector<std::string>& overrides) {
        for (const auto& text : overrides) {
            Override o;
            try {
                o = parse_override(text, &is_string_key);
            } catch (const ProfileError& e) {
                for (const auto& p : e.problems()) problems_.push_back(p);
                continue;
            }
            if (!is_section(o.section)) {
                problem(o.where, fmt::format("unknown section [{}]{}", o.section, suggestion_for_section(o.section)));
                continue;
            }
            // The alias pair: a command-line value of one replaces a profile value of the other.
            if (o.key == "buffer_size" && (o.section == "replay_buffer" || o.section == "training")) {
                const auto* other = find_key(o.section == "training" ? "replay_buffer" : "training", o.key);
                if (set_at_.count(other->full_name()) && !from_cli_.count(other->full_name())) {
                    set_value(profile_, *other, get_value(Profile{}, *other));
                    set_at_.erase(other->full_name());
                }
            }
            apply_value(o.section, o.key, o.value, o.where, true);
        }
    }

    Profile finish() {
        check_required();
        resolve_alias();
        std::set<std::string> bad;
        for (const auto& d : schema()) {
            // Unchecked while unset: a required key (check_required reports it) and the alias, which shows
            // replay_buffer.buffer_size's value: that value is checked (and reported) once, there.
            if ((d.required || d.full_name() == "training.buffer_size") && !set_at_.count(d.full_name())) continue;
            const auto msg = d.check(get_value(profile_, d));
            if (!msg.empty()) {
                problem(where_of({d.full_name()}), msg);
                bad.insert(d.full_name());
            }
        }
        check_cross_keys(bad);
        if (!problems_.empty()) throw ProfileError(problems_);
        return profile_;
    }

private:
    void problem(const Location& where, const std::string& message) {
        problems_.push_back(fmt::format("{}: {}", where.text(), message));
    }

    std::string suggestion_for_section(const std::string& name) const {
        if (const auto g = closest(name, section_names())) return fmt::format("; did you mean [{}]?", *g);
        const auto owners = owners_of(name);
        if (!owners.empty()) return fmt::format("; '{}' is a key of [{}], not a section", name, owners.front());
        return fmt::format("; the sections are [{}]", fmt::join(section_names(), "], ["));
    }

    void apply_value(const std::string& section, const std::string& key, const TomlValue& value,
                     const Location& key_where, bool cli) {
        const auto* d = find_key(section, key);
        if (d == nullptr && section == "gpu" && key == "tf32" && stored_ && !cli &&
            value.kind == TomlValue::Kind::boolean) {  // an earlier version's own profile: its meaning
            const auto* precision = find_key("gpu", "precision");
            set_value(profile_, *precision, KeyValue{std::string(value.boolean ? "tf32" : "fp32")});
            set_at_[precision->full_name()] = value.where.line > 0 ? value.where : key_where;
            return;
        }
        if (d == nullptr && section == "gpu" && key == "tf32") {  // a key of earlier versions, replaced
            problem(key_where,
                    "gpu.tf32 is no longer a key: gpu.precision replaces it; write gpu.precision = "
                    "\"tf32\" for TF32 products (tf32 = true), gpu.precision = \"fp32\" for FP32 "
                    "(tf32 = false), or \"bf16\" (docs/profiles.md)");
            return;
        }
        if (d == nullptr) {
            std::string hint;
            if (const auto g = closest(key, keys_of(section)))
                hint = fmt::format("; did you mean '{}'?", *g);
            else if (const auto owners = owners_of(key); !owners.empty())
                hint = fmt::format("; '{}' is a key of [{}]", key, fmt::join(owners, ", "));
            else
                hint = fmt::format("; the keys of [{}] are {}", section, fmt::join(keys_of(section), ", "));
            problem(key_where, fmt::format("unknown key '{}' in [{}]{}", key, section, hint));
            return;
        }
        std::string error;
        const auto v = convert(*d, value, error);
        if (!v) {
            problem(value.where.line > 0 || cli ? value.where : key_where, error);
            return;
        }
        set_value(profile_, *d, *v);
        const auto name = d->full_name();
        set_at_[name] = value.where.line > 0 || cli ? value.where : key_where;
        if (cli)
            from_cli_.insert(name);
        else
            from_cli_.erase(name);
    }

    /// For a float given to an integer key: the integer to write instead, when there is one.
    static std::string integer_hint(const TomlValue& v) {
        if (v.kind != TomlValue::Kind::floating) return "";
        const double x = v.floating;
        if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15)
            return fmt::format(" (write {}: an integer has no fraction or exponent)", static_cast<std::int64_t>(x));
        return " (an integer has no fraction or exponent)";
    }

    static std::optional<KeyValue> convert(const KeyDescriptor& d, const TomlValue& v, std::string& error) {
        using K = TomlValue::Kind;
        const auto got = [&](const TomlValue& x) {  // "a string (\"abc\")", "an integer (3)", "an array"
            const std::string value = x.kind == K::string     ? toml_quote(x.string.substr(0, 40))
                                      : x.kind == K::integer  ? fmt::format("{}", x.integer)
                                      : x.kind == K::floating ? fmt::format("{}", x.floating)
                                                              : "";
            return value.empty() ? std::string(kind_phrase(x.kind))
                                 : fmt::format("{} ({})", kind_phrase(x.kind), value);
        };
        const auto fail = [&](std::string_view must, const std::string& hint = "") -> std::optional<KeyValue> {
            error = fmt::format("{} must be {}, got {}{}", d.full_name(), must, got(v), hint);
            return std::nullopt;
        };
        switch (d.type) {
            case KeyType::integer:
                if (v.kind == K::integer) return KeyValue{v.integer};
                return fail("an integer", integer_hint(v));
            case KeyType::number:
                if (v.kind == K::floating) return KeyValue{v.floating};
                if (v.kind == K::integer) return KeyValue{static_cast<double>(v.integer)};
                return fail("a number");
            case KeyType::boolean:
                if (v.kind == K::boolean) return KeyValue{v.boolean};
                return fail("true or false");
            case KeyType::string:
                if (v.kind == K::string) return KeyValue{v.string};
                return fail("a string (in quotes)");
            case KeyType::int_array: {
                if (v.kind != K::array) return fail("an array of integers like [256, 256]");
                std::vector<std::int64_t> out;
                for (std::size_t i = 0; i < v.items.size(); ++i) {
                    if (v.items[i].kind != K::integer) {
                        error = fmt::format("{} must be an array of integers like [256, 256]; element {} is {}",
                                            d.full_name(), i, got(v.items[i]));
                        return std::nullopt;
                    }
                    out.push_back(v.items[i].integer);
                }
                return KeyValue{std::move(out)};
            }
        }
        return std::nullopt;
    }

    void check_required() {
        for (const auto& d : schema()) {
            if (!d.required || set_at_.count(d.full_name())) continue;
            const std::string fix = d.choices.empty() ? std::string() : fmt::format(" ({})", d.range_text());
            const auto example = d.choices.substr(0, d.choices.find('|'));
            if (run_header_.line > 0 && d.section == "run")
                problem(run_header_,
                        fmt::format("[{}] has no '{}', which is required{}: add e.g. {} = \"{}\" under this header",
                                    d.section, d.key, fix, d.key, example));
            else
                problem(Location{origin_, 1, 1},
                        fmt::format(
                            "missing required key {}{}: add a [{}] section with e.g. {} = \"{}\", or pass --set {}={}",
                            d.full_name(), fix, d.section, d.key, example, d.full_name(), example));
        }
    }

    void resolve_alias() {
        auto& p = profile_;
        const bool alias_set = set_at_.count("training.buffer_size") && p.training.buffer_size != 0;
        if (alias_set) {
            if (set_at_.count("replay_buffer.buffer_size") && p.replay_buffer.buffer_size != p.training.buffer_size) {
                problem(where_of({"training.buffer_size"}),
                        fmt::format("training.buffer_size = {} contradicts replay_buffer.buffer_size "
                                    "= {} (set at {}); they are the same setting: keep one",
                                    p.training.buffer_size, p.replay_buffer.buffer_size,
                                    where_of({"replay_buffer.buffer_size"}).text()));
            } else {
                p.replay_buffer.buffer_size = p.training.buffer_size;
                set_at_["replay_buffer.buffer_size"] = where_of({"training.buffer_size"});
            }
        }
        // The resolved profile shows the alias with the value in force.
        if (!alias_set) p.training.buffer_size = p.replay_buffer.buffer_size;
    }

    /// Where a key's value came from, or the most relevant place for a rule over several keys: a
    /// command-line value, else the last one set in the file, else the top of the file.
    Location where_of(std::initializer_list<std::string> names) const {
        std::optional<Location> best;
        bool best_cli = false;
        for (const auto& n : names) {
            const auto it = set_at_.find(n);
            if (it == set_at_.end()) continue;
            const bool cli = from_cli_.count(n) > 0;
            if (!best || (cli && !best_cli) || (cli == best_cli && !cli && it->second.line > best->line)) {
                best = it->second;
                best_cli = cli;
            }
        }
        return best ? *best : Location{origin_, 1, 1};
    }

    void check_cross_keys(const std::set<std::string>& bad) {
        const auto& p = profile_;
        // A rule names every key it reads. It runs only when each of them passed its own type
        // and range check: a key out of range is reported once, at the key, and a rule never
        // computes with it (dt.embedding % dt.heads with heads = 0 would trap).
        const CrossKeyRule rule = [&](std::initializer_list<std::string> keys,
                                      const std::function<std::string()>& check) {
            for (const auto& k : keys)
                if (bad.count(k)) return;  // already reported; a second message would be noise
            if (const auto message = check(); !message.empty()) problem(where_of(keys), message);
        };
        // run.trainer's entry (config/trainer_profiles.hpp); none while run.trainer is missing or unknown.
        const TrainerProfile* kind = find_trainer_profile(p.run.trainer);
        const auto can = [&](bool TrainerProfile::*capability) { return kind != nullptr && kind->*capability; };
        rule({"data.train_fraction", "data.val_fraction", "data.test_fraction"}, [&] {
            const double sum = p.data.train_fraction + p.data.val_fraction + p.data.test_fraction;
            return sum > 1.0 + 1e-9
                       ? fmt::format("data.train_fraction + val_fraction + test_fraction = {} + {} + {} = {} exceeds 1",
                                     p.data.train_fraction, p.data.val_fraction, p.data.test_fraction, sum)
                       : "";
        });
        rule({"walk_forward.folds"}, [&] {
            return p.walk_forward.folds == 1
                       ? "walk_forward.folds = 1: a walk-forward needs at least 2 folds (0 = an ordinary run)"
                       : "";
        });
        rule({"walk_forward.fold", "walk_forward.folds"}, [&] {
            return p.walk_forward.folds >= 2 && p.walk_forward.fold >= p.walk_forward.folds
                       ? fmt::format("walk_forward.fold = {} does not exist: the folds are 0 .. {}",
                                     p.walk_forward.fold, p.walk_forward.folds - 1)
                       : "";
        });
        rule({"run.search", "run.trainer"}, [&]() -> std::string {
            if (p.run.search == "none" || can(&TrainerProfile::searches)) return "";
            std::vector<std::string> names;
            for (const auto name : trainers_with(&TrainerProfile::searches)) {
                names.emplace_back(name);
                for (auto& c : names.back()) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            }
            std::sort(names.begin(), names.end());
            return fmt::format("run.search = \"{}\" trains {} populations, not {}", p.run.search, words(names, "and"),
                               p.run.trainer);
        });
        rule({"run.search", "run.eval_interval", "data.val_fraction"}, [&] {
            return p.run.search != "none" && (p.run.eval_interval == 0 || p.data.val_fraction == 0)
                       ? fmt::format(
                             "run.search = \"{}\" ranks the agents on their validation metric: it needs "
                             "run.eval_interval > 0 and data.val_fraction > 0",
                             p.run.search)
                       : "";
        });
        rule({"run.search", "search.interval", "run.eval_interval"}, [&] {
            return p.run.search != "none" && p.run.eval_interval > 0 && p.search.interval % p.run.eval_interval != 0
                       ? fmt::format(
                             "search.interval = {} is not a multiple of run.eval_interval = {}: a {} round ranks the "
                             "agents on the validation of the same step",
                             p.search.interval, p.run.eval_interval, p.run.search == "pbt" ? "PBT" : "halving")
                       : "";
        });
        rule({"data.format", "data.path"}, [&] {
            return p.data.format == "csv" && p.data.path.empty()
                       ? "data.format = \"csv\" but data.path is empty: give the CSV with data.path or --data"
                       : "";
        });
        rule({"data.val_fraction", "early_stopping.patience"}, [&] {
            return p.data.val_fraction == 0 && p.early_stopping.patience > 0
                       ? "early stopping (early_stopping.patience > 0) needs a validation split: set data.val_fraction "
                         "> 0, or early_stopping.patience = 0"
                       : "";
        });
        rule({"replay_buffer.min_replay_size", "replay_buffer.buffer_size", "training.buffer_size"}, [&] {
            return exceeds("replay_buffer.min_replay_size", p.replay_buffer.min_replay_size, "buffer_size",
                           p.replay_buffer.buffer_size, ": training would never start");
        });
        rule({"replay_buffer.batch_size", "replay_buffer.buffer_size", "training.buffer_size"}, [&] {
            return exceeds("replay_buffer.batch_size", p.replay_buffer.batch_size, "buffer_size",
                           p.replay_buffer.buffer_size);
        });
        rule({"experience.n_step", "experience.gpu_timesteps_per_episode"}, [&] {
            return p.experience.n_step >= p.experience.gpu_timesteps_per_episode
                       ? fmt::format(
                             "experience.n_step = {} must be shorter than an episode (gpu_timesteps_per_episode = {})",
                             p.experience.n_step, p.experience.gpu_timesteps_per_episode)
                       : "";
        });
        rule({"dqn.v_min", "dqn.v_max"}, [&] {
            return !(static_cast<float>(p.dqn.v_min) < static_cast<float>(p.dqn.v_max))
                       ? fmt::format(
                             "dqn.v_min = {} must be below dqn.v_max = {} (also as the 32-bit floats the kernels use: "
                             "{} and {})",
                             p.dqn.v_min, p.dqn.v_max, static_cast<float>(p.dqn.v_min), static_cast<float>(p.dqn.v_max))
                       : "";
        });
        rule({"training.epsilon_start", "training.epsilon_end"}, [&] {
            return exceeds("training.epsilon_end", p.training.epsilon_end, "epsilon_start", p.training.epsilon_start);
        });
        rule({"iql.dataset"}, [&] {
            return p.iql.dataset.empty() ? "iql.dataset is empty: use \"behaviour\" or the path of a replay dump" : "";
        });
        rule({"run.eval_interval", "data.val_fraction"}, [&] {
            return p.run.eval_interval > 0 && p.data.val_fraction == 0
                       ? fmt::format(
                             "run.eval_interval = {} asks for validation backtests but data.val_fraction = 0 leaves no "
                             "validation split: set data.val_fraction > 0 (e.g. 0.15), or run.eval_interval = 0",
                             p.run.eval_interval)
                       : "";
        });
        rule({"data.test_fraction"}, [&] {
            return p.data.test_fraction == 0
                       ? "data.test_fraction = 0 leaves no test split, but every run ends with a backtest on it "
                         "(backtest/, summary.json): give it a share, e.g. data.test_fraction = 0.15"
                       : "";
        });
        // The rules that hold for run.trainer's trainer alone (config/trainer_profiles.cpp).
        if (kind != nullptr && kind->rules != nullptr) kind->rules(p, rule);
        rule({"eval.deterministic"}, [&] {
            return !p.eval.deterministic
                       ? "eval.deterministic = false (sampled actions in backtests) is not implemented yet: every "
                         "trainer evaluates its greedy / most likely action; set eval.deterministic = true"
                       : "";
        });
        rule({"early_stopping.metric", "run.trainer"}, [&] {
            return p.early_stopping.metric == "val_loss" && !can(&TrainerProfile::validation_loss)
                       ? fmt::format(
                             "early_stopping.metric = \"val_loss\" needs run.trainer = {} (the {} trainer has no "
                             "validation loss); use val_sharpe, val_return or val_sortino",
                             quoted_trainers_with(&TrainerProfile::validation_loss), p.run.trainer)
                       : "";
        });
        rule({"supervised.exit_threshold", "supervised.entry_threshold"}, [&] {
            return exceeds("supervised.exit_threshold", p.supervised.exit_threshold, "supervised.entry_threshold",
                           p.supervised.entry_threshold, ": a position would be closed at a score that opens it");
        });
        rule({"dt.embedding", "dt.heads"}, [&]() -> std::string {
            if (p.dt.embedding % p.dt.heads != 0)
                return fmt::format(
                    "dt.embedding = {} is not a multiple of dt.heads = {}: every head gets embedding / heads features",
                    p.dt.embedding, p.dt.heads);
            if (p.dt.embedding / p.dt.heads > 128)
                return fmt::format("dt.embedding / dt.heads = {} features per head exceeds 128: use more heads",
                                   p.dt.embedding / p.dt.heads);
            return "";
        });
        rule({"dt.dataset"}, [&] {
            return p.dt.dataset.empty() ? "dt.dataset is empty: use \"behaviour\" or the path of a replay dump" : "";
        });
        rule({"replay_buffer.save_dump", "run.trainer"}, [&] {
            return p.replay_buffer.save_dump && !can(&TrainerProfile::replay_memory)
                       ? fmt::format(
                             "replay_buffer.save_dump = true needs run.trainer = {} (the {} trainer has no replay "
                             "memory)",
                             quoted_trainers_with(&TrainerProfile::replay_memory), p.run.trainer)
                       : "";
        });
    }

    std::string origin_;
    bool stored_ = false;
    Profile profile_;
    Location run_header_;
    std::map<std::string, Location> set_at_;  ///< where each key's value came from
    std::set<std::string> from_cli_;          ///< keys whose value came from the command line
    std::vector<std::string> problems_;
};

}  // namespace

ProfileError::ProfileError(std::vector<std::string> problems)
    : UsageError(join_problems(problems)), problems_(std::move(problems)) {}

Profile resolve_profile_text(std::string_view text, std::string_view origin,
                             const std::vector<std::string>& overrides) {
    Resolver r(origin, text.starts_with(kResolvedProfileHeader));
    r.apply_document(parse_toml(text, origin));  // a syntax error ends here: nothing to check
    r.apply_overrides(overrides);
    return r.finish();
}

Profile resolve_profile_file(const std::string& path, const std::vector<std::string>& overrides) {
    util::RegularFile file(path);
    if (!file.ok()) throw UsageError(fmt::format("{}: {}; a profile is a TOML text file", path, file.error()));
    std::string text;
    bool too_big = false;
    if (!file.read_all(text, kMaxProfileBytes, &too_big)) throw UsageError(fmt::format("{}: {}", path, file.error()));
    if (too_big)
        throw ProfileError({fmt::format(
            "{}:1:1: the profile is larger than {} bytes (1 MiB): is this really a profile?", path, kMaxProfileBytes)});
    return resolve_profile_text(text, path, overrides);
}

std::int64_t data_seed(const Profile& profile) {
    return profile.data.seed < 0 ? profile.run.seed : profile.data.seed;
}

}  // namespace fh::config
