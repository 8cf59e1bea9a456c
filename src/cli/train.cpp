/// @file train.cpp
/// @brief `foxhunt-train [train]`: resolve the profile, name the run and decide what to do when its
///        directory exists (src/run/naming.hpp), then run the training pipeline (src/run/train.cpp).
#include <fmt/format.h>

#include <charconv>

#include "cli/commands.hpp"
#include "run/naming.hpp"
#include "run/population.hpp"
#include "run/run.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

std::vector<std::int64_t> parse_seeds(const std::string& text) {
    std::vector<std::int64_t> seeds;
    if (text.empty()) return seeds;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = std::min(text.find(',', start), text.size());
        std::int64_t v = -1;
        const char* last = text.data() + end;
        const auto [ptr, ec] = std::from_chars(text.data() + start, last, v);  // an empty field is an error too
        if (ec != std::errc() || ptr != last || v < 0 || v > 9'000'000'000'000'000LL)
            throw UsageError(
                fmt::format("--seeds takes non-negative integers separated by commas (1,2,5), got '{}'", text));
        seeds.push_back(v);
        if (seeds.size() > run::kMaxAgents)
            throw UsageError(fmt::format("--seeds: more than {} seeds; at most {} agents train in one process",
                                         run::kMaxAgents, run::kMaxAgents));
        start = end + 1;
    }
    return seeds;
}

namespace {

int train_population(const GlobalOptions& g) {
    if (!g.resume.empty() && run::is_population_directory(g.resume)) {
        if (g.auto_name)
            throw UsageError(
                "--auto-name names a new population and --resume continues an existing one: give one of them");
        if (!g.profile.empty() || !g.seeds.empty() || !g.population_grid.empty() || !g.population_record.empty())
            throw UsageError(
                fmt::format("--resume {}: a population resumes each agent with its own config.toml; "
                            "--profile, --seeds and --population-grid do not apply",
                            g.resume));
        return print_result(run::resume_population(g.resume, all_overrides(g), g.force));
    }
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    run::PopulationRequest request{parse_seeds(g.seeds), g.population_grid, !g.population_record.empty()};
    if (!g.resume.empty())
        throw UsageError(
            fmt::format("--resume {} continues one run; a population resumes from its directory (the one "
                        "with population.json), with no --seeds, --population-grid or run.population",
                        g.resume));
    auto plan = run::plan_population(path, profile, all_overrides(g), request, g.auto_name);
    plan.record = g.population_record;
    log::info("profile {}: trainer {}, device {}, {} env steps, {} agents", path, profile.run.trainer,
              profile.run.device, profile.run.total_steps, plan.agents.size());
    return print_result(run::train_population(plan, g.force));
}

}  // namespace

int run_train(const GlobalOptions& g) {
    if (!g.seeds.empty() || !g.population_grid.empty() || !g.population_record.empty() ||
        (!g.resume.empty() && run::is_population_directory(g.resume)))
        return train_population(g);
    std::string path;
    config::Profile profile = resolve_from_options(g, &path);
    if (profile.run.population > 1) return train_population(g);
    run::refuse_search_without_population(profile);
    const std::vector<std::string> overrides = all_overrides(g);
    std::string resume = g.resume;
    if (g.auto_name) {
        if (!resume.empty())
            throw UsageError(
                "--auto-name names a new run and --resume continues an existing one: give one of them "
                "(with --auto-name, run.on_exists = \"resume\" resumes the named run)");
        profile.run.name = run::derived_run_name(profile, overrides);
        log::info("run name (--auto-name): {}", profile.run.name);
    }
    if (resume.empty()) {
        const run::Placement placement = run::place_run(profile);
        if (!placement.reason.empty()) log::info("{}", placement.reason);
        if (placement.action == run::Placement::Action::skip) return print_result(placement.path);
        if (placement.action == run::Placement::Action::resume) resume = placement.path;
    }
    log::info("profile {}: trainer {}, device {}, {} env steps, seed {}", path, profile.run.trainer, profile.run.device,
              profile.run.total_steps, profile.run.seed);
    return print_result(run::train(profile, resume, overrides, g.force));
}

}  // namespace fh::cli
