/// @file vec_env.cpp
#include "env/vec_env.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "util/errors.hpp"
#include "abi/env.h"

namespace fh::env {

EpisodeStarts episode_starts(const data::BarSeries& bars, std::size_t warmup, data::SplitRange split) {
    EpisodeStarts out;
    const auto& seg = bars.segment_starts;
    for (std::size_t k = 0; k < seg.size(); ++k) {
        const std::size_t seg_begin = seg[k];
        const std::size_t seg_end = k + 1 < seg.size() ? seg[k + 1] : bars.size();
        const std::size_t first = std::max(seg_begin + warmup, split.begin);
        const std::size_t end = std::min(seg_end, split.end);
        for (std::size_t t = first; t + 1 < end; ++t) {
            out.starts.push_back(static_cast<int>(t));
            out.ends.push_back(static_cast<int>(end));
        }
    }
    return out;
}

namespace {
constexpr const char* kSplitNames[] = {"train", "validation", "test"};  // index: Split, as splits_

void require_market_dim(const EnvParams& params, const DeviceMarket& market) {
    if (params.market_dim != market.market_dim())
        throw std::invalid_argument(
            fmt::format("VecEnv: params.market_dim {} != the market's {}", params.market_dim, market.market_dim()));
}
}  // namespace

DeviceMarket::DeviceMarket(ops::Device& ops, const data::MarketData& m) {
    const auto& b = m.bars;
    if (b.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() / std::max(1, m.market_dim)))
        throw DataError(fmt::format("{}: {} bars is more than the environment can index", m.source, b.size()));
    if (m.features.size() != b.size() * static_cast<std::size_t>(m.market_dim) || m.atr.size() != b.size())
        throw std::invalid_argument("DeviceMarket: features/atr do not match the bar count");
    market_dim_ = m.market_dim;
    n_bars_ = static_cast<int>(b.size());
    open_ = ops.from_host<double>(b.open);
    high_ = ops.from_host<double>(b.high);
    low_ = ops.from_host<double>(b.low);
    close_ = ops.from_host<double>(b.close);
    atr_ = ops.from_host<double>(m.atr);
    features_ = ops.from_host<float>(m.features);
    const data::SplitRange ranges[3] = {m.train, m.val, m.test};
    for (int s = 0; s < 3; ++s) {
        const EpisodeStarts st = episode_starts(b, m.warmup_bars, ranges[s]);
        splits_[s].starts = ops.from_host<int>(st.starts);
        splits_[s].ends = ops.from_host<int>(st.ends);
        splits_[s].count = static_cast<int>(st.starts.size());
        host_starts_[s] = st;
    }
    feature_names_ = m.feature_names;
    norm_ = m.norm;
    host_close_ = b.close;
}

MarketView DeviceMarket::view(Split split) const {
    const auto& s = splits_[static_cast<int>(split)];
    if (s.count == 0)
        throw DataError(
            fmt::format("the {} split has no bar where an episode can start (it needs "
                        "bars after the feature warm-up with a following bar): use more "
                        "data or change the split fractions",
                        kSplitNames[static_cast<int>(split)]));
    return MarketView{open_.view().data(),
                      high_.view().data(),
                      low_.view().data(),
                      close_.view().data(),
                      atr_.view().data(),
                      features_.view().data(),
                      s.starts.view().data(),
                      s.ends.view().data(),
                      s.count,
                      n_bars_};
}

std::size_t VecEnv::device_bytes(int agents, int n_envs_per_agent, int state_dim) {
    const auto n = static_cast<std::size_t>(agents) * static_cast<std::size_t>(n_envs_per_agent);
    return (agents > 1 ? static_cast<std::size_t>(agents) * sizeof(abi::EnvAgent) : 0) +
           n * (sizeof(EnvState) + PORTFOLIO_STRIDE * sizeof(float) + 2 * static_cast<std::size_t>(state_dim) * 4 +
                sizeof(float) + 1 + sizeof(StepInfo));
}

VecEnv::VecEnv(ops::Device& ops, const DeviceMarket& market, Split split, const EnvParams& params, int n_envs)
    : VecEnv(ops, std::vector<const DeviceMarket*>{&market}, {params.seed}, split, params, n_envs) {}

VecEnv::VecEnv(ops::Device& ops, const std::vector<const DeviceMarket*>& markets,
               const std::vector<std::uint64_t>& seeds, Split split, const EnvParams& params, int n_envs_per_agent)
    : ops_(ops), params_(params), split_(split), n_envs_(n_envs_per_agent) {
    if (n_envs_per_agent < 1) throw std::invalid_argument("VecEnv: n_envs must be >= 1");
    if (markets.empty() || seeds.size() != markets.size())
        throw std::invalid_argument("VecEnv: one market and one seed per agent");
    std::vector<abi::EnvAgent> agents;
    for (std::size_t a = 0; a < markets.size(); ++a) {
        require_market_dim(params, *markets[a]);
        agents.push_back(abi::EnvAgent{markets[a]->view(split), seeds[a]});
    }
    market_ = agents.front().market;
    if (agents.size() > 1) {
        if (static_cast<long long>(n_envs_per_agent) * static_cast<long long>(agents.size()) >
            std::numeric_limits<int>::max())
            throw std::invalid_argument("VecEnv: the agents' environments exceed an int");
        n_envs_ = n_envs_per_agent * static_cast<int>(agents.size());
        agents_ = ops.from_host<abi::EnvAgent>(agents);
    }
    const auto n = static_cast<std::size_t>(n_envs_);
    state_ = ops.alloc<EnvState>(n);
    portfolio_ = ops.alloc<float>(n * PORTFOLIO_STRIDE);
    observations_ = ops.alloc<float>(2 * n * static_cast<std::size_t>(params.state_dim));
    reward_ = ops.alloc<float>(n);
    done_ = ops.alloc<std::uint8_t>(n);
    info_ = ops.alloc<StepInfo>(n);
    // Episode counters start at 0 so that episode k of environment e is the same on every backend.
    const std::vector<EnvState> zero(n, EnvState{});
    ops.upload<EnvState>(state_.view(), zero);
}

void VecEnv::reset_all() {
    fh::ops::run(ops_, fh::ops::EnvReset{state_.view(), portfolio_.view(), {}, market_, params_, agents_.cview()});
    fh::ops::run(ops_, fh::ops::EnvGatherStates{states_view(), state_.cview(), portfolio_.cview(), market_, params_,
                                                agents_.cview()});
}

void VecEnv::restart_agent(int a, const DeviceMarket& market, std::uint64_t seed) {
    const std::size_t agents = std::max<std::size_t>(1, agents_.size());
    if (a < 0 || static_cast<std::size_t>(a) >= agents) throw std::out_of_range("VecEnv::restart_agent: no such agent");
    require_market_dim(params_, market);
    const std::size_t i = static_cast<std::size_t>(a);
    EnvParams own = params_;
    own.seed = seed;
    const abi::EnvAgent agent =
        start_into(ops_, persistent(), i, market, split_, own, n_envs_ / static_cast<int>(agents));
    if (agents_.size() == 0) {
        params_.seed = seed;
    } else {
        ops_.upload<abi::EnvAgent>(agents_.view().subview(i, 1), std::vector<abi::EnvAgent>{agent});
    }
    if (a == 0) market_ = agent.market;
}

abi::EnvAgent VecEnv::start_into(ops::Device& ops, const Persistent& to, std::size_t i, const DeviceMarket& market,
                                 Split split, const EnvParams& params, int n_envs) {
    const std::size_t n = static_cast<std::size_t>(n_envs), D = static_cast<std::size_t>(params.state_dim);
    VecEnv alone(ops, market, split, params, n_envs);
    alone.reset_all();
    const Persistent from = alone.persistent();
    ops.copy_raw(to.state.subview(i * n, n), ops::View<const EnvState>(from.state));
    ops::run(ops, ops::Copy{to.portfolio.subview(i * n * PORTFOLIO_STRIDE, n * PORTFOLIO_STRIDE),
                            ops::View<const float>(from.portfolio)});
    ops::run(ops, ops::Copy{to.states.subview(i * n * D, n * D), ops::View<const float>(from.states)});
    ops.synchronize();  // the copies are done before alone's buffers go
    return abi::EnvAgent{alone.market(), params.seed};
}

void VecEnv::step(ops::View<const int> actions) {
    fh::ops::run(ops_, fh::ops::EnvStep{state_.view(), portfolio_.view(), reward_.view(), done_.view(), info_.view(),
                                        actions, market_, params_, agents_.cview()});
    fh::ops::run(ops_, fh::ops::EnvGatherStates{next_states_view(), state_.cview(), portfolio_.cview(), market_,
                                                params_, agents_.cview()});
    fh::ops::run(ops_,
                 fh::ops::EnvReset{state_.view(), portfolio_.view(), done_.cview(), market_, params_, agents_.cview()});
    fh::ops::run(ops_, fh::ops::EnvGatherStates{states_view(), state_.cview(), portfolio_.cview(), market_, params_,
                                                agents_.cview()});
}

}  // namespace fh::env
