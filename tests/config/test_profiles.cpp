/// @file test_profiles.cpp
/// @brief The shipped profiles, defaults, the schema's own consistency and the round trip of
///        the resolved-profile emitter.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "build_config.hpp"
#include "config/memory_estimate.hpp"
#include "config/schema.hpp"
#include "trainers/memory_plan.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using fh::test::resolve;

namespace {

std::string source_dir() {
    const char* s = std::getenv("FH_SOURCE_DIR");
    return s != nullptr ? s : FH_SOURCE_DIR;
}

const std::vector<std::string> kShipped = {"dqn-smoketest", "dqn-full", "ppo-smoketest",        "ppo-full",
                                           "iql-smoketest", "iql-full", "supervised-smoketest", "supervised-full",
                                           "dt-smoketest",  "dt-full"};

}  // namespace

TEST_CASE("every shipped profile parses, validates and round-trips", "[config]") {
    for (const auto& name : kShipped) {
        INFO("profile " << name);
        const auto path = (fs::path(source_dir()) / "profiles" / (name + ".toml")).string();
        REQUIRE(fs::is_regular_file(path));
        const auto p = fh::config::resolve_profile_file(path);
        CHECK(p.run.trainer == name.substr(0, name.find('-')));
        CHECK(p.run.name == name);
        // The full profiles ship TF32 products; the smoketests (and the tests built on them) FP32.
        CHECK(p.gpu.precision == (name.ends_with("-full") ? "tf32" : "fp32"));
        const auto text = fh::config::to_toml(p);
        const auto again = resolve(text);
        REQUIRE(again.ok);
        CHECK(again.profile == p);
        CHECK(fh::config::to_toml(again.profile) == text);
        // memory estimate: every consumer named, the total within an H100's 80 GB
        const auto items = fh::trainers::estimate_device_memory(p, {});
        CHECK(items.size() >= 5);
        CHECK(fh::config::total_bytes(items) < (80ull << 30));
    }
    // every *.toml in profiles/ is one of the list above, or at least valid
    for (const auto& e : fs::directory_iterator(fs::path(source_dir()) / "profiles")) {
        if (e.path().extension() != ".toml") continue;
        INFO(e.path());
        CHECK_NOTHROW(fh::config::resolve_profile_file(e.path().string()));
    }
}

TEST_CASE("smoketest profiles are small", "[config]") {
    const auto shipped = [](const std::string& name) {
        return fh::config::resolve_profile_file(fh::config::locate_profile(name));
    };
    const auto dqn = shipped("dqn-smoketest");
    CHECK(dqn.run.trainer == "dqn");
    CHECK(dqn.replay_buffer.buffer_size == 256);
    CHECK(dqn.training.buffer_size == 256);  // the alias shows the value in force
    CHECK(dqn.replay_buffer.min_replay_size == 64);
    CHECK(dqn.experience.gpu_timesteps_per_episode == 50);
    CHECK(dqn.experience.gpu_n_episodes == 4);
    CHECK(dqn.data.path.empty());

    const auto ppo = shipped("ppo-smoketest.toml");
    CHECK(ppo.run.trainer == "ppo");
    CHECK(ppo.env.position_levels == 15);
    CHECK(ppo.num_actions() == 45);
    CHECK(ppo.ppo.diversity_window == 100);

    const auto iql = shipped("iql-smoketest");
    CHECK(iql.run.trainer == "iql");
    CHECK(iql.iql.dataset == "behaviour");
    CHECK(iql.iql.dataset_size <= 10000);

    const auto sup = shipped("supervised-smoketest");
    CHECK(sup.run.trainer == "supervised");
    CHECK(sup.early_stopping.metric == "val_loss");

    CHECK(sup.run.total_steps <= 10000);  // no environments while it trains
    CHECK(sup.data.synthetic_bars <= 20000);

    const auto dt = shipped("dt-smoketest");
    CHECK(dt.run.trainer == "dt");
    CHECK(dt.dt.dataset == "behaviour");
    CHECK(dt.dt.dataset_size <= 10000);
    CHECK(dt.dt.context * dt.dt.batch_size <= 1000);  // token rows per update: seconds on the CPU

    for (const auto* p : {&dqn, &ppo, &iql, &dt}) {
        CHECK(p->run.total_steps <= 10000);
        CHECK(p->experience.gpu_n_episodes <= 16);
        CHECK(p->data.synthetic_bars <= 20000);
    }
    const auto full = shipped("ppo-full");
    CHECK(full.env.position_levels == 15);
    CHECK(full.experience.gpu_n_episodes >= 1024);
}

TEST_CASE("shipped profiles are found by name, with or without .toml", "[config]") {
    const auto a = fh::config::locate_profile("dqn-full");
    const auto b = fh::config::locate_profile("dqn-full.toml");
    CHECK(a == b);
    CHECK(fs::path(a).filename() == "dqn-full.toml");
    const auto names = fh::config::shipped_profile_names();
    for (const auto& n : kShipped) CHECK(std::find(names.begin(), names.end(), n) != names.end());
    try {
        fh::config::locate_profile("dqn-smoketst");
        FAIL("no error");
    } catch (const fh::UsageError& e) {
        CHECK(std::string(e.what()).find("Did you mean 'dqn-smoketest'?") != std::string::npos);
        CHECK(e.code() == fh::ExitCode::usage);
    }
    CHECK_THROWS_AS(fh::config::locate_profile("no/such/file.toml"), fh::UsageError);
    CHECK_THROWS_AS(fh::config::resolve_profile_file(source_dir()), fh::UsageError);  // a directory
}

TEST_CASE("defaults: only run.trainer is required, and every default is valid", "[config]") {
    for (const char* t : {"dqn", "ppo", "iql", "supervised"}) {
        const auto o = resolve(fmt::format("[run]\ntrainer = \"{}\"\n", t));
        INFO(o.message);
        REQUIRE(o.ok);
        fh::config::Profile expected;
        expected.run.trainer = t;
        expected.training.buffer_size = expected.replay_buffer.buffer_size;
        CHECK(o.profile == expected);
    }
    const fh::config::Profile defaults;
    for (const auto& k : fh::config::schema()) {
        if (k.required) continue;
        INFO(k.full_name());
        CHECK(k.check(fh::config::get_value(defaults, k)).empty());
    }
}

TEST_CASE("schema: one descriptor per key, bound to distinct fields", "[config]") {
    std::set<std::string> names;
    std::set<const void*> fields;
    fh::config::Profile p;
    for (const auto& k : fh::config::schema()) {
        CHECK(names.insert(k.full_name()).second);
        CHECK(fh::config::is_section(k.section));
        CHECK_FALSE(k.doc.empty());
        CHECK(k.doc.find('|') == std::string_view::npos);
        const void* f = std::visit([](auto* ptr) -> const void* { return ptr; }, k.field(p));
        CHECK(fields.insert(f).second);
    }
    // the keys other parts of the program depend on
    for (const char* n : {"run.trainer",
                          "run.device",
                          "data.synthetic_bars",
                          "data.planted_signal",
                          "env.position_levels",
                          "experience.gpu_n_episodes",
                          "training.tau",
                          "training.max_bad_updates",
                          "dqn.mse_blend_alpha",
                          "dqn.iqn_quantiles",
                          "dqn.her_ratio",
                          "ppo.diversity_window",
                          "iql.expectile",
                          "iql.max_weight",
                          "ppo.clip_value",
                          "ppo.lr_schedule",
                          "ppo.curiosity_coef",
                          "replay_buffer.save_dump",
                          "early_stopping.metric",
                          "gpu.memory_fraction",
                          "run.on_exists",
                          "run.population",
                          "run.population_batching",
                          "data.seed",
                          "eval.bootstrap_block",
                          "eval.confidence",
                          "eval.collapse_window",
                          "walk_forward.folds",
                          "walk_forward.fold",
                          "walk_forward.window",
                          "checkpoint.keep_replay",
                          "run.search",
                          "search.interval",
                          "search.fraction",
                          "search.perturb_down",
                          "search.perturb_up",
                          "search.resample_probability",
                          "search.copy_replay",
                          "search.eta",
                          "search.max_points"})
        CHECK(names.count(n) == 1);
    CHECK(names.size() == 145);
}

TEST_CASE("the emitter writes every key and its text resolves to the same profile", "[config]") {
    auto o = resolve(fh::test::kMinimal +
                     "name = \"a \\\"quoted\\\" \\\\ name\"\n[dqn]\nhidden = [1, 2, 3]\n"
                     "v_min = -0.1\nv_max = 1e6\n[training]\nlearning_rate = 1e-9\n");
    REQUIRE(o.ok);
    const auto text = fh::config::to_toml(o.profile);
    for (const auto& k : fh::config::schema()) CHECK(text.find(fmt::format("\n{} = ", k.key)) != std::string::npos);
    const auto again = resolve(text);
    REQUIRE(again.ok);
    CHECK(again.profile == o.profile);
    CHECK(again.profile.run.name == "a \"quoted\" \\ name");
}
