/// @file test_dqn_resume.cpp
/// @brief A DQN run stopped halfway and continued from its saved state ends exactly where an
///        uninterrupted run ends (CPU backend): weights, optimizer, replay, environments, metrics.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "device/cuda/check.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "io/safetensors.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

config::Profile resume_profile(long long total_steps, std::vector<std::string> overrides = {}) {
    overrides.push_back("run.total_steps=" + std::to_string(total_steps));
    return config::resolve_profile_text(R"(
[run]
trainer = "dqn"
seed = 3
log_interval = 200
[data]
synthetic_bars = 3000
[experience]
gpu_n_episodes = 4
gpu_timesteps_per_episode = 30
[replay_buffer]
buffer_size = 256
min_replay_size = 64
batch_size = 32
[training]
tau = 0.0
target_update_period = 50
[dqn]
hidden = [16]
)",
                                        "resume-profile", overrides);
}

struct Snapshot {
    std::vector<std::vector<std::byte>> tensors;
    std::vector<std::int64_t> counters;  ///< steps, updates, pushed steps
};

Snapshot save(ops::Device& ops, trainers::DqnAgent& t) {
    return {test::snapshot(ops, t), t.counter_values()};
}

void restore(ops::Device& ops, trainers::DqnAgent& t, const Snapshot& s) {
    const auto tensors = t.state_tensors();
    REQUIRE(tensors.size() == s.tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) ops.upload<std::byte>(tensors[i].bytes, s.tensors[i]);
    t.restore_counter_values(s.counters);
}

}  // namespace

// paired_max_rows >= 0: DqnTrainer::set_paired_forward_max_rows (below the batch of 32: the
// online and target forwards of large batches, side by side).
static void check_resume_equivalence(ops::Device& ops, const std::vector<std::string>& overrides = {},
                                     int paired_max_rows = -1) {
    const auto set_rows = [&](trainers::DqnAgent& t) {
        if (paired_max_rows >= 0) t.engine().set_paired_forward_max_rows(paired_max_rows);
    };
    const auto full = resume_profile(1600, overrides);
    const auto market = data::load_market(trainers::data_options(full));
    env::DeviceMarket dm(ops, market);

    auto straight_engine = trainers::make_dqn_trainer(ops, full, dm);
    auto& straight = *straight_engine;
    set_rows(straight);
    const auto straight_log = test::run_training(straight, full);

    const auto half = resume_profile(800, overrides);
    auto first_half_engine = trainers::make_dqn_trainer(ops, half, dm);
    auto& first_half = *first_half_engine;
    set_rows(first_half);
    test::run_training(first_half, half);
    const Snapshot snap = save(ops, first_half);
    CHECK(snap.counters.at(0) == 200);

    auto resumed_engine = trainers::make_dqn_trainer(ops, full, dm);
    auto& resumed = *resumed_engine;
    set_rows(resumed);
    restore(ops, resumed, snap);
    const auto resumed_log = test::run_training(resumed, full);

    REQUIRE(resumed_log.size() == 4);  // steps 1000, 1200, 1400, 1600
    for (std::size_t i = 0; i < 4; ++i) {
        const auto& a = straight_log[4 + i];
        const auto& b = resumed_log[i];
        for (const char* key : {"env_steps", "losses/loss", "q/mean"})
            CHECK(test::metric(a, key) == test::metric(b, key));
        CHECK(test::histogram(a) == test::histogram(b));
    }
    const auto sa = save(ops, straight), sb = save(ops, resumed);
    CHECK(sa.tensors == sb.tensors);  // every byte of state, replay and environments included
}

TEST_CASE("DQN resumed from its saved state equals an uninterrupted run (CPU, exact)", "[trainers][dqn][resume]") {
    ops::CpuDevice ops;
    SECTION("the C51 head") {
        check_resume_equivalence(ops);
    }
    SECTION("with CQL") {
        check_resume_equivalence(ops, {"dqn.cql_alpha=0.3"});
    }
    SECTION("the scalar head with CQL") {
        check_resume_equivalence(ops, {"dqn.head=mse", "dqn.cql_alpha=0.3"});
    }
    SECTION("with curiosity") {
        check_resume_equivalence(ops, {"dqn.curiosity=true", "dqn.curiosity_coef=0.5"});
    }
    SECTION("with attention") {
        check_resume_equivalence(ops, {"dqn.attention=true"});
    }
    SECTION("with an ensemble") {
        check_resume_equivalence(ops, {"dqn.ensemble_size=3", "dqn.ensemble_bootstrap=0.5", "dqn.ensemble_ucb=0.5"});
    }
    SECTION("the IQN head with CQL") {
        check_resume_equivalence(ops, {"dqn.head=iqn", "dqn.cql_alpha=0.3"});
    }
    SECTION("with HER") {
        check_resume_equivalence(ops, {"dqn.her=true"});
    }
    SECTION("HER with an ensemble, attention and curiosity") {
        check_resume_equivalence(ops, {"dqn.her=true", "dqn.her_ratio=0.5", "dqn.ensemble_size=3", "dqn.attention=true",
                                       "dqn.curiosity=true"});
    }
    SECTION("HER with the IQN head") {
        check_resume_equivalence(ops, {"dqn.her=true", "dqn.head=iqn"});
    }
    SECTION("the online and target forwards side by side") {
        check_resume_equivalence(ops, {}, 16);
    }
}

TEST_CASE("the DQN online and target forwards side by side equal the paired pass (CPU, exact)", "[trainers][dqn]") {
    // Large batches run the online network on [s; s'] beside the target on s' alone instead of
    // both on [s; s'] in one batched pass; the CPU's rows are independent, so every bit agrees.
    ops::CpuDevice ops;
    for (const std::vector<std::string>& overrides : {std::vector<std::string>{},
                                                      {"dqn.double_dqn=false", "dqn.ensemble_size=3", "dqn.her=true"},
                                                      {"dqn.head=mse", "dqn.attention=true"}}) {
        const auto profile = resume_profile(1000, overrides);
        const auto market = data::load_market(trainers::data_options(profile));
        env::DeviceMarket dm(ops, market);
        auto paired_engine = trainers::make_dqn_trainer(ops, profile, dm);
        auto split_engine = trainers::make_dqn_trainer(ops, profile, dm);
        auto &paired = *paired_engine, &split = *split_engine;
        split.engine().set_paired_forward_max_rows(16);
        const auto a = test::run_training(paired, profile), b = test::run_training(split, profile);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i)
            CHECK(test::metric(a[i], "losses/loss") == test::metric(b[i], "losses/loss"));
        CHECK(save(ops, paired).tensors == save(ops, split).tensors);
    }
}

TEST_CASE("DQN resumed from its saved state equals an uninterrupted run (GPU, exact)", "[gpu][trainers][dqn][resume]") {
    SECTION("the C51 head") {
        check_resume_equivalence(fh::test::gpu_ops());
    }
    SECTION("with CQL") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.cql_alpha=0.3"});
    }
    SECTION("the scalar head with CQL") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.head=mse", "dqn.cql_alpha=0.3"});
    }
    SECTION("with curiosity") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.curiosity=true", "dqn.curiosity_coef=0.5"});
    }
    SECTION("with attention") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.attention=true"});
    }
    SECTION("with an ensemble") {
        check_resume_equivalence(fh::test::gpu_ops(),
                                 {"dqn.ensemble_size=3", "dqn.ensemble_bootstrap=0.5", "dqn.ensemble_ucb=0.5"});
    }
    SECTION("the IQN head with CQL") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.head=iqn", "dqn.cql_alpha=0.3"});
    }
    SECTION("with HER") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.her=true"});
    }
    SECTION("HER with an ensemble, attention and curiosity") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.her=true", "dqn.her_ratio=0.5", "dqn.ensemble_size=3",
                                                       "dqn.attention=true", "dqn.curiosity=true"});
    }
    SECTION("HER with the IQN head") {
        check_resume_equivalence(fh::test::gpu_ops(), {"dqn.her=true", "dqn.head=iqn"});
    }
    SECTION("the online and target forwards side by side") {
        check_resume_equivalence(fh::test::gpu_ops(), {}, 16);
    }
}

TEST_CASE("DQN on the GPU: collection beside the updates, captured, equals every op issued alone (exact)",
          "[gpu][trainers][dqn]") {
    // A ring of 64 steps wrapped six times, two updates per iteration: the updates never sample
    // the slot the collection beside them overwrites, or the results would differ.
    auto& ops = fh::test::gpu_ops();
    std::vector<std::string> overrides{"training.updates_per_iteration=2"};
    // With curiosity the collection branch also scores, rewards and trains the forward model.
    SECTION("plain") {}
    SECTION("with curiosity") {
        overrides.insert(overrides.end(), {"dqn.curiosity=true", "dqn.curiosity_coef=0.5"});
    }
    SECTION("with attention") {
        overrides.push_back("dqn.attention=true");
    }
    SECTION("with an ensemble") {
        overrides.insert(overrides.end(), {"dqn.ensemble_size=3", "dqn.ensemble_ucb=0.5"});
    }
    SECTION("the IQN head") {
        overrides.insert(overrides.end(), {"dqn.head=iqn", "dqn.cql_alpha=0.3"});
    }
    SECTION("with HER") {
        overrides.insert(overrides.end(), {"dqn.her=true", "dqn.curiosity=true"});
    }
    const auto p = resume_profile(1600, overrides);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto overlapped_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& overlapped = *overlapped_engine;
    const auto log_a = test::run_training(overlapped, p);
    const Snapshot a = save(ops, overlapped);

    struct OneByOne {  // every op synchronised on its own: no graphs, no overlap
        OneByOne() { cuda::set_sync_debug(true); }
        ~OneByOne() { cuda::set_sync_debug(false); }
    };
    Snapshot b;
    std::vector<trainers::LogLine> log_b;
    {
        const OneByOne one_by_one;
        auto sequential_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& sequential = *sequential_engine;
        log_b = test::run_training(sequential, p);
        b = save(ops, sequential);
    }
    CHECK(a.counters == b.counters);
    CHECK(a.counters.at(1) == 2 * (400 - 16));  // updates from the 17th step on (64 transitions stored)
    REQUIRE(log_a.size() == log_b.size());
    for (std::size_t i = 0; i < log_a.size(); ++i)
        for (const char* key : {"losses/loss", "q/mean", "charts/grad_norm"})
            CHECK(test::metric(log_a[i], key) == test::metric(log_b[i], key));
    CHECK(a.tensors == b.tensors);
}

// checkpoint.keep_replay = false: the checkpoint holds no replay memory and the counters of an
// empty one; the trainer loaded from it keeps steps and updates, writes its ring from slot 0
// again (the device counters' pushed steps from 0) and updates once min_replay_size transitions
// (16 steps of 4 environments) are stored again.
static void check_refill(ops::Device& ops, const std::vector<std::string>& overrides = {}) {
    auto o = overrides;
    o.push_back("checkpoint.keep_replay=false");
    const auto p = resume_profile(800, o);  // 200 collection steps, an update each from the 17th
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto trainer = trainers::make_dqn_trainer(ops, p, dm);
    test::run_training(*trainer, p);
    REQUIRE(trainer->counter_values() == std::vector<std::int64_t>{200, 184, 200});
    const auto dir = std::filesystem::temp_directory_path() / ("fh-refill-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "lean.safetensors").string();
    trainers::EarlyStopping early(0, 0.0, 0);
    trainers::save_checkpoint(path, ops, *trainer, p, market, early);
    const auto file = io::TensorFile::read(path);
    CHECK(file.metadata("replay") == "omitted");
    for (const auto& name : file.names()) {
        INFO(name);
        CHECK(!trainers::replay_memory(name));
    }
    CHECK(file.has("params/online"));
    CHECK(file.has("env/state"));

    auto resumed = trainers::make_dqn_trainer(ops, p, dm);
    const auto record =
        trainers::load_checkpoint(path, ops, *resumed, p, nullptr, static_cast<std::int64_t>(market.bars.size()));
    CHECK(record.replay_omitted);
    CHECK(resumed->counter_values() == std::vector<std::int64_t>{200, 184, 0});
    CHECK(ops.to_host(ops::View<const float>(resumed->policy_weights())) ==
          ops.to_host(ops::View<const float>(trainer->policy_weights())));
    for (int i = 0; i < 16; ++i) resumed->iterate();  // refilling: no update
    CHECK(resumed->counter_values() == std::vector<std::int64_t>{216, 184, 16});
    const auto dump = resumed->replay_dump();  // the ring: slots 0 .. 15 written, the rest empty
    const std::size_t D = static_cast<std::size_t>(dump.state_dim), n = static_cast<std::size_t>(dump.n_envs);
    CHECK(dump.pushed_steps == 16);
    for (std::size_t row = 0; row < dump.states.size() / D; ++row) {
        const bool written = std::any_of(dump.states.begin() + static_cast<std::ptrdiff_t>(row * D),
                                         dump.states.begin() + static_cast<std::ptrdiff_t>((row + 1) * D),
                                         [](float x) { return x != 0.0f; });
        INFO(row);
        CHECK(written == (row < 16 * n));
    }
    for (int i = 0; i < 24; ++i) resumed->iterate();  // an update a step again
    CHECK(resumed->counter_values() == std::vector<std::int64_t>{240, 208, 40});
    const auto line = resumed->read_log(1.0);
    CHECK(std::isfinite(test::metric(line, "losses/loss")));
    CHECK(test::metric(line, "losses/loss") > 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a DQN checkpoint without the replay (checkpoint.keep_replay = false) refills it from empty (CPU)",
          "[trainers][dqn][resume][keep_replay]") {
    ops::CpuDevice ops;
    SECTION("the C51 head") {
        check_refill(ops);
    }
    SECTION("with HER (her/goals left out too) and curiosity") {
        check_refill(ops, {"dqn.her=true", "dqn.curiosity=true"});
    }
}

TEST_CASE("a DQN checkpoint without the replay (checkpoint.keep_replay = false) refills it from empty (GPU)",
          "[gpu][trainers][dqn][resume][keep_replay]") {
    SECTION("the C51 head") {
        check_refill(fh::test::gpu_ops());
    }
    SECTION("with HER (her/goals left out too) and curiosity") {
        check_refill(fh::test::gpu_ops(), {"dqn.her=true", "dqn.curiosity=true"});
    }
}

TEST_CASE("a DQN checkpoint with the earlier counters tensor name still resumes", "[trainers][dqn][resume]") {
    ops::CpuDevice ops;
    const auto p = resume_profile(400);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    test::run_training(trainer, p);
    const auto dir = std::filesystem::temp_directory_path() / ("fh-old-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string current = (dir / "current.safetensors").string(), old = (dir / "old.safetensors").string();
    trainers::EarlyStopping early(0, 0.0, 0);
    trainers::save_checkpoint(current, ops, trainer, p, market, early);

    // The same file with "counters" named as before (counters/steps_updates_pushed).
    const auto file = io::TensorFile::read(current);
    io::TensorFileWriter w;
    for (const auto& name : file.names()) {
        const auto t = file.tensor(name);
        w.add(name == "counters" ? "counters/steps_updates_pushed" : name, t.dtype, t.shape, t.bytes);
    }
    for (const auto& [key, value] : file.all_metadata())
        if (key != "format" && key != "format_version" && key != "data_xxh64" && key != "header_xxh64")
            w.set_metadata(key, value);
    w.write(old);

    auto resumed_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& resumed = *resumed_engine;
    trainers::load_checkpoint(old, ops, resumed, p, nullptr, static_cast<std::int64_t>(market.bars.size()));
    CHECK(resumed.counter_values() == trainer.counter_values());
    std::filesystem::remove_all(dir);
}

TEST_CASE("a DQN checkpoint of the earlier parameter layout is refused by name", "[trainers][dqn][resume]") {
    ops::CpuDevice ops;
    const auto p = resume_profile(200);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    const auto dir = std::filesystem::temp_directory_path() / ("fh-layout-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string current = (dir / "current.safetensors").string(), old = (dir / "old.safetensors").string();
    trainers::EarlyStopping early(0, 0.0, 0);
    trainers::save_checkpoint(current, ops, trainer, p, market, early);
    const auto file = io::TensorFile::read(current);
    CHECK(file.metadata("layout_version").value_or("") == "dqn/2");
    // The same file as an earlier version wrote it: no parameter_layout key.
    io::TensorFileWriter w;
    for (const auto& name : file.names()) {
        const auto t = file.tensor(name);
        w.add(name, t.dtype, t.shape, t.bytes);
    }
    for (const auto& [key, value] : file.all_metadata())
        if (key != "format" && key != "format_version" && key != "data_xxh64" && key != "header_xxh64" &&
            key != "layout_version")
            w.set_metadata(key, value);
    w.write(old);
    auto resumed_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& resumed = *resumed_engine;
    CHECK_THROWS_WITH(
        trainers::load_checkpoint(old, ops, resumed, p, nullptr, static_cast<std::int64_t>(market.bars.size())),
        Catch::Contains("layout dqn/1") && Catch::Contains("earlier version"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoint metadata: +infinity round-trips, malformed values are refused (exit 2)",
          "[trainers][dqn][resume]") {
    ops::CpuDevice ops;
    const auto p = resume_profile(400);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    const auto dir = std::filesystem::temp_directory_path() / ("fh-meta-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "c.safetensors").string(), edited = (dir / "e.safetensors").string();
    trainers::EarlyStopping early(5, 0.0, 0);
    early.observe(100, std::numeric_limits<double>::infinity());
    trainers::save_checkpoint(path, ops, trainer, p, market, early, {12.5, "{\"strategy\":{},\"buy_and_hold\":{}}"});
    trainers::EarlyStopping back(5, 0.0, 0);
    const auto record =
        trainers::load_checkpoint(path, ops, trainer, p, &back, static_cast<std::int64_t>(market.bars.size()));
    CHECK(*back.best() == std::numeric_limits<double>::infinity());
    CHECK(back.best_step() == 100);
    CHECK(record.wall_seconds == 12.5);
    CHECK(record.best_validation == "{\"strategy\":{},\"buy_and_hold\":{}}");

    // A copy with one metadata value replaced (and valid checksums: written by the writer).
    const auto rewrite = [&](const std::string& key, const std::string& value) {
        const auto file = io::TensorFile::read(path);
        io::TensorFileWriter w;
        for (const auto& name : file.names()) {
            const auto t = file.tensor(name);
            w.add(name, t.dtype, t.shape, t.bytes);
        }
        for (const auto& [k, v] : file.all_metadata())
            if (k != "format" && k != "format_version" && k != "data_xxh64" && k != "header_xxh64")
                w.set_metadata(k, k == key ? value : v);
        w.write(edited);
    };
    const auto error_of = [&](const std::string& key, const std::string& value) -> std::string {
        rewrite(key, value);
        trainers::EarlyStopping es(5, 0.0, 0);
        try {
            trainers::load_checkpoint(edited, ops, trainer, p, &es, static_cast<std::int64_t>(market.bars.size()));
        } catch (const io::CheckpointError& e) {
            CHECK(e.code() == ExitCode::usage);
            return e.what();
        }
        return "<accepted>";
    };
    CHECK_THAT(error_of("early_stopping_best", "abc"),
               Catch::Contains("metadata early_stopping_best = \"abc\" is not a number"));
    CHECK_THAT(error_of("early_stopping_best_step", "1e5"), Catch::Contains("is not an integer >= -1"));
    CHECK_THAT(error_of("early_stopping_stale", "-2"), Catch::Contains("is not an integer >= 0"));
    CHECK_THAT(error_of("wall_seconds", "nan"), Catch::Contains("is not a finite number"));
    CHECK_THAT(error_of("best_validation", "not json"), Catch::Contains("is not a backtest JSON object"));
    CHECK_THAT(error_of("replay", "partial"),
               Catch::Contains("metadata replay = \"partial\" is not \"kept\", \"omitted\" or \"none\""));
    CHECK(error_of("early_stopping_best", "none") == "<accepted>");
    rewrite("norm_clip", "-1");
    CHECK_THROWS_WITH(trainers::checkpoint_normalization(edited),
                      Catch::Contains("metadata norm_clip = \"-1\" is not"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoint integers and metadata are checked against the run at load, checksums notwithstanding (exit 2)",
          "[trainers][dqn][resume]") {
    ops::CpuDevice ops;
    const auto p = resume_profile(400);
    const auto market = data::load_market(trainers::data_options(p));
    const auto bars = static_cast<std::int64_t>(market.bars.size());
    env::DeviceMarket dm(ops, market);
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    test::run_training(trainer, p);
    const auto dir = std::filesystem::temp_directory_path() / ("fh-int-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "c.safetensors").string(), edited = (dir / "e.safetensors").string();
    trainers::EarlyStopping early(5, 0.0, 0);
    trainers::save_checkpoint(path, ops, trainer, p, market, early, {1.0, "{\"strategy\":{},\"buy_and_hold\":{}}"});
    // A copy with one tensor's bytes (or one metadata value) changed, with valid checksums.
    const auto rewrite = [&](const std::string& tensor, const std::function<void(std::vector<std::byte>&)>& edit,
                             const std::string& key = "", const std::string& value = "") {
        const auto file = io::TensorFile::read(path);
        io::TensorFileWriter w;
        std::vector<std::vector<std::byte>> keep;
        keep.reserve(file.names().size());
        for (const auto& name : file.names()) {
            const auto t = file.tensor(name);
            keep.emplace_back(t.bytes.begin(), t.bytes.end());
            if (name == tensor) edit(keep.back());
            w.add(name, t.dtype, t.shape, std::span<const std::byte>(keep.back()));
        }
        for (const auto& [k, v] : file.all_metadata())
            if (k != "format" && k != "format_version" && k != "data_xxh64" && k != "header_xxh64")
                w.set_metadata(k, k == key ? value : v);
        w.write(edited);
    };
    const auto error = [&]() -> std::string {
        auto fresh_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& fresh = *fresh_engine;
        trainers::EarlyStopping es(5, 0.0, 0);
        try {
            trainers::load_checkpoint(edited, ops, fresh, p, &es, bars);
        } catch (const io::CheckpointError& e) {
            CHECK(e.code() == ExitCode::usage);
            return e.what();
        }
        return "<accepted>";
    };
    const auto set_int = [](std::size_t offset, std::int32_t v) {
        return [=](std::vector<std::byte>& b) { std::memcpy(b.data() + offset, &v, sizeof v); };
    };
    rewrite("", [](std::vector<std::byte>&) {});
    CHECK(error() == "<accepted>");
    // An environment's bar index past the data (segfaulted in the collection step).
    rewrite("env/state", set_int(offsetof(env::EnvState, t), 2147483647));
    CHECK_THAT(error(), Catch::Contains("tensor env/state: environment 0") && Catch::Contains("t 2147483647"));
    rewrite("env/state",
            set_int(sizeof(env::EnvState) + offsetof(env::EnvState, end_bar), static_cast<std::int32_t>(bars + 1)));
    CHECK_THAT(error(), Catch::Contains("tensor env/state: environment 1"));
    rewrite("env/state", set_int(offsetof(env::EnvState, position), 1000000));
    CHECK_THAT(error(), Catch::Contains("exceeds instrument.max_contracts"));
    // A replay action past the action space (a replay dump refuses the same value).
    rewrite("replay/actions", set_int(4 * 7, 1000000));
    CHECK_THAT(error(), Catch::Contains("tensor replay/actions: element 7 is 1000000, not an action in [0, 8]"));
    rewrite("replay/actions", set_int(0, -1));
    CHECK_THAT(error(), Catch::Contains("tensor replay/actions: element 0 is -1"));
    rewrite("replay/done", [](std::vector<std::byte>& b) { b[3] = std::byte{7}; });
    CHECK_THAT(error(), Catch::Contains("tensor replay/done: element 3 is 7"));
    rewrite("guard/state", set_int(offsetof(nn::GuardState, bad_total), -5));
    CHECK_THAT(error(), Catch::Contains("tensor guard/state"));
    rewrite("counters", [](std::vector<std::byte>& b) {
        const std::int64_t v = -3;
        std::memcpy(b.data() + 8, &v, sizeof v);
    });
    CHECK_THAT(error(), Catch::Contains("tensor counters: counter 1 is -3"));
    // best_validation that is not the expected object: refused at load, not after training.
    for (const std::string bad : {"[1,2]", "{\"strategy\":1}", "{\"strategy\":{}} trailing", "{\"strategy\":{},}"}) {
        INFO(bad);
        rewrite(
            "", [](std::vector<std::byte>&) {}, "best_validation", bad);
        CHECK_THAT(error(), Catch::Contains("metadata best_validation"));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a C51 checkpoint is refused by an IQN profile and an IQN checkpoint by a C51 one, by name",
          "[trainers][dqn][iqn][resume]") {
    ops::CpuDevice ops;
    const auto dir = std::filesystem::temp_directory_path() / ("fh-iqn-layout-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const bool from_iqn : {false, true}) {
        INFO("checkpoint of the " << (from_iqn ? "IQN" : "C51") << " head");
        const auto written =
            resume_profile(200, from_iqn ? std::vector<std::string>{"dqn.head=iqn"} : std::vector<std::string>{});
        const auto reader =
            resume_profile(200, from_iqn ? std::vector<std::string>{} : std::vector<std::string>{"dqn.head=iqn"});
        const auto market = data::load_market(trainers::data_options(written));
        env::DeviceMarket dm(ops, market);
        auto trainer_engine = trainers::make_dqn_trainer(ops, written, dm);
        auto& trainer = *trainer_engine;
        const std::string path = (dir / "ckpt.safetensors").string();
        trainers::EarlyStopping early(0, 0.0, 0);
        trainers::save_checkpoint(path, ops, trainer, written, market, early);
        CHECK(io::TensorFile::read(path).metadata("layout_version").value_or("") == (from_iqn ? "dqn-iqn/1" : "dqn/2"));
        auto other_engine = trainers::make_dqn_trainer(ops, reader, dm);
        auto& other = *other_engine;
        CHECK_THROWS_WITH(
            trainers::load_checkpoint(path, ops, other, reader, nullptr, static_cast<std::int64_t>(market.bars.size())),
            Catch::Contains(from_iqn ? "layout dqn-iqn/1" : "layout dqn/2") &&
                Catch::Contains(from_iqn ? "holds an IQN network" : "cannot load the weights of a C51") &&
                Catch::Contains("dqn.head"));
        // The same head reads it.
        auto same_engine = trainers::make_dqn_trainer(ops, written, dm);
        auto& same = *same_engine;
        CHECK_NOTHROW(trainers::load_checkpoint(path, ops, same, written, nullptr,
                                                static_cast<std::int64_t>(market.bars.size())));
    }
    std::filesystem::remove_all(dir);
}
