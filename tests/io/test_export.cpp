/// @file test_export.cpp
/// @brief [export] `foxhunt-train export`: a checkpoint's policy as named per-layer tensors with
///        its normalisation and profile; the exported file, read back with the project's
///        safetensors reader, reproduces the policy's decisions by a forward pass written here by
///        hand (docs/checkpoints.md "Exported weights" in C++: the test suite needs no numpy);
///        every trainer exports.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "io/safetensors.hpp"
#include "device/make_device.hpp"
#include "support/shell.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/trainer.hpp"

namespace fs = std::filesystem;

namespace {

std::string last_line(std::string t) {
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const auto nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

/// A short CPU run of a shipped profile; its run directory.
fs::path train(const std::string& profile, const std::string& steps, const fs::path& dir) {
    const auto r = fh::test::run_shell(
        "\"$EXE\" --profile " + profile + " --device cpu --set run.total_steps=" + steps +
            " --set run.eval_interval=0 --set run.checkpoint_interval=0 --output '" + (dir / "runs").string() + "'",
        dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return last_line(r.out);
}

std::vector<float> tensor(const fh::io::TensorFile& f, const std::string& name) {
    const auto t = f.tensor(name);
    return f.get<float>(name, t.shape);
}

/// y = x W^T + b for W (out, in) read from the export.
std::vector<double> linear(const fh::io::TensorFile& f, const std::string& layer, const std::vector<double>& x) {
    const auto w = f.tensor(layer + ".weight");
    REQUIRE(w.shape.size() == 2);
    REQUIRE(w.shape[1] == x.size());
    const auto W = tensor(f, layer + ".weight");
    const auto b = tensor(f, layer + ".bias");
    std::vector<double> y(w.shape[0]);
    for (std::size_t o = 0; o < y.size(); ++o) {
        double s = b[o];
        for (std::size_t i = 0; i < x.size(); ++i) s += static_cast<double>(W[o * x.size() + i]) * x[i];
        y[o] = s;
    }
    return y;
}

/// An MLP's output: `name`.l0 ... l<layers-1>, `act` after every layer but the last.
std::vector<double> mlp(const fh::io::TensorFile& f, const std::string& name, std::size_t layers, std::vector<double> x,
                        double (*act)(double)) {
    for (std::size_t l = 0; l < layers; ++l) {
        x = linear(f, name + ".l" + std::to_string(l), x);
        if (l + 1 < layers)
            for (auto& v : x) v = act(v);
    }
    return x;
}

double relu(double v) {
    return v > 0 ? v : 0;
}
double tanh_(double v) {
    return std::tanh(v);
}

/// Greedy action from per-action values, and whether the best is clear of the second (a near
/// tie could round either way between the float network and this double forward).
std::pair<int, bool> argmax(const std::vector<double>& q) {
    const auto best = static_cast<int>(std::max_element(q.begin(), q.end()) - q.begin());
    double second = -1e300;
    for (std::size_t a = 0; a < q.size(); ++a)
        if (static_cast<int>(a) != best) second = std::max(second, q[a]);
    return {best,
            q[static_cast<std::size_t>(best)] - second > 1e-4 * (1 + std::abs(q[static_cast<std::size_t>(best)]))};
}

/// The docs' forward pass of each trainer's policy, from the exported file alone.
std::vector<double> action_values(const fh::io::TensorFile& f, const fh::config::Profile& p,
                                  const std::vector<double>& s) {
    const int A = static_cast<int>(p.num_actions());
    if (p.run.trainer == "ppo") return mlp(f, "actor", p.ppo.hidden.size() + 1, s, tanh_);
    if (p.run.trainer == "iql") return mlp(f, "policy", p.iql.hidden.size() + 1, s, relu);
    REQUIRE(p.run.trainer == "dqn");
    REQUIRE(p.dqn.head == "c51");
    // The trunk: ReLU after every layer; the head: [value (Z) | advantages (A, Z)] with dueling.
    const auto out = mlp(f, "q", p.dqn.hidden.size() + 1, s, relu);
    const int Z = static_cast<int>(p.dqn.num_atoms);
    REQUIRE(out.size() == static_cast<std::size_t>((p.dqn.dueling ? Z : 0) + A * Z));
    std::vector<double> q(static_cast<std::size_t>(A));
    const double* adv = out.data() + (p.dqn.dueling ? Z : 0);
    std::vector<double> logits(static_cast<std::size_t>(A * Z));
    for (int z = 0; z < Z; ++z) {
        double mean = 0;
        for (int a = 0; a < A; ++a) mean += adv[a * Z + z];
        mean /= A;
        for (int a = 0; a < A; ++a)
            logits[static_cast<std::size_t>(a * Z + z)] =
                p.dqn.dueling ? out[static_cast<std::size_t>(z)] + adv[a * Z + z] - mean : adv[a * Z + z];
    }
    for (int a = 0; a < A; ++a) {
        const double* l = logits.data() + a * Z;
        const double mx = *std::max_element(l, l + Z);
        double sum = 0, qa = 0;
        for (int z = 0; z < Z; ++z) sum += std::exp(l[z] - mx);
        for (int z = 0; z < Z; ++z)
            qa += std::exp(l[z] - mx) / sum * (p.dqn.v_min + z * (p.dqn.v_max - p.dqn.v_min) / (Z - 1));
        q[static_cast<std::size_t>(a)] = qa;
    }
    return q;
}

/// Exports `run` and checks the file: the bare form, the refusal of an existing file, the tensors
/// and metadata; for DQN, PPO and IQL also that the hand-written forward pass chooses the
/// policy's actions on observations built as eval builds them.
void check_export(const fs::path& run, const fs::path& dir, bool decisions) {
    const fs::path out = dir / (run.filename().string() + ".safetensors");
    const auto r = fh::test::run_shell("\"$EXE\" export '" + run.string() + "' -o '" + out.string() + "'", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(last_line(r.out) == out.string());
    const auto again = fh::test::run_shell("\"$EXE\" export '" + run.string() + "' -o '" + out.string() + "'", dir);
    CHECK(again.code == 2);
    CHECK(again.err.find("--force") != std::string::npos);
    CHECK(fh::test::run_shell("\"$EXE\" export '" + run.string() + "' -o '" + out.string() + "' --force", dir).code ==
          0);
    // Another checkpoint than a run directory's best: a checkpoint file named directly.
    CHECK(fh::test::run_shell("\"$EXE\" export '" + (run / "checkpoints" / "last.safetensors").string() + "' -o '" +
                                  (dir / "last.safetensors").string() + "' --force",
                              dir)
              .code == 0);

    const auto f = fh::io::TensorFile::read(out.string());
    const fs::path best = run / "checkpoints" / "best.safetensors";  // else the last (no validation)
    const std::string checkpoint = (fs::exists(best) ? best : run / "checkpoints" / "last.safetensors").string();
    const auto p = fh::config::resolve_profile_text(*f.metadata("profile"), "export");
    CHECK(*f.metadata("content") == "foxhunt-policy/1");
    CHECK(*f.metadata("trainer") == p.run.trainer);
    CHECK(*f.metadata("checkpoint") == checkpoint);
    const int state_dim = std::stoi(*f.metadata("state_dim"));
    const auto mean = tensor(f, "norm.mean");
    const auto stddev = tensor(f, "norm.stddev");
    CHECK(static_cast<int>(mean.size()) + 8 == state_dim);
    // The weights are the checkpoint's params/online, slice by slice; nothing else of the state.
    const auto ck = fh::io::TensorFile::read(checkpoint);
    auto ops = fh::ops::make_device(fh::ops::parse_device_spec("cpu"));  // outlives the policy's buffers
    const auto policy = fh::trainers::make_greedy_policy(p, state_dim);
    const auto weights = ck.get<float>("params/online", {policy->weights_size()});
    const auto layout = fh::trainers::policy_weights_layout(p, state_dim);
    std::size_t floats = 0;
    for (const auto& name : f.names()) {
        if (name.rfind("norm.", 0) == 0) continue;
        CHECK(name.find('/') == std::string::npos);
        floats += f.tensor(name).bytes.size() / sizeof(float);
    }
    std::size_t slices = 0;
    for (const auto& s : layout.slices()) slices += s.size;
    CHECK(floats == slices + (weights.size() - layout.total()));
    CHECK(!f.has("adam/m"));
    CHECK(fs::file_size(out) < fs::file_size(checkpoint));
    if (!decisions) return;

    // Observations as eval builds them: normalised features, then the 8 portfolio features.
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.5f);
    const int n = 64;
    std::vector<float> states(static_cast<std::size_t>(n * state_dim));
    const float clip = std::stof(*f.metadata("norm_clip"));
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < state_dim; ++j) {
            float v = normal(rng);  // a normalised feature lies within the clip
            if (j < static_cast<int>(mean.size())) v = std::clamp(v, -clip, clip);
            states[static_cast<std::size_t>(i * state_dim + j)] = v;
        }
    const auto w = ops->from_host<float>(weights);
    const auto s = ops->from_host<float>(states);
    auto a = ops->alloc<int>(static_cast<std::size_t>(n));
    policy->act(*ops, w.cview(), a.view(), s.cview(), n);
    const auto actions = ops->to_host<int>(a.cview());
    int checked = 0;
    for (int i = 0; i < n; ++i) {
        const std::vector<double> obs(states.begin() + i * state_dim, states.begin() + (i + 1) * state_dim);
        const auto [best, clear] = argmax(action_values(f, p, obs));
        if (!clear) continue;
        INFO("observation " << i);
        CHECK(best == actions[static_cast<std::size_t>(i)]);
        checked += 1;
    }
    CHECK(checked >= n * 3 / 4);
}

}  // namespace

TEST_CASE("export: the exported weights reproduce the policy's decisions (DQN C51 dueling, PPO, IQL)", "[export]") {
    const auto dir = fh::test::scratch_dir("fh-export", "decisions");
    check_export(train("dqn-smoketest", "200", dir), dir, true);
    check_export(train("ppo-smoketest", "400", dir), dir, true);
    check_export(train("iql-smoketest", "20", dir), dir, true);
    fs::remove_all(dir);
}

TEST_CASE("export: every trainer exports (supervised and dt with their calibration)", "[export]") {
    const auto dir = fh::test::scratch_dir("fh-export", "trainers");
    for (const char* profile : {"supervised-smoketest", "dt-smoketest"}) {
        const fs::path run = train(profile, "20", dir);
        check_export(run, dir, false);
        const auto f = fh::io::TensorFile::read((dir / (run.filename().string() + ".safetensors")).string());
        CHECK(f.has("calibration"));
    }
    // A DQN with the options of its head: scalar (mse) head, an ensemble, attention.
    const auto r = fh::test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --set run.total_steps=100 --set "
        "dqn.head='\"mse\"' --set dqn.ensemble_size=2 --set dqn.attention=true --output '" +
            (dir / "dqn-options").string() + "'",
        dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const fs::path options = last_line(r.out);
    check_export(options, dir, false);
    // Refused: no checkpoint, an export given as the checkpoint, options that do not apply.
    CHECK(fh::test::run_shell("\"$EXE\" export '" + dir.string() + "' -o x.safetensors", dir).code == 2);
    CHECK(fh::test::run_shell("\"$EXE\" export '" + (dir / "missing.safetensors").string() + "' -o x.safetensors", dir)
              .code == 2);
    CHECK(fh::test::run_shell("\"$EXE\" export '" + (dir / "last.safetensors").string() + "' -o y.safetensors", dir)
              .code == 2);
    CHECK(
        fh::test::run_shell("\"$EXE\" export '" + options.string() + "' -o z.safetensors --set run.seed=1", dir).code ==
        2);
    CHECK(fh::test::run_shell("\"$EXE\" export '" + options.string() + "'", dir).code == 2);  // no -o
    CHECK(!fs::exists(dir / "z.safetensors"));
    fs::remove_all(dir);
}
