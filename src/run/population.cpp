/// @file population.cpp
/// @brief The population: its plan (seeds x grid lines, each agent's profile; the grid file is read in
///        population_grid.cpp), its training (its directory, the agents' devices and markets, their host
///        workers, a search's rounds; population.json in population_record.cpp), resume and bench.
#include "run/population.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "config/memory_estimate.hpp"
#include "config/schema.hpp"
#include "device/cuda/kernel_timing.hpp"
#include "data/load.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "device/cuda_device.hpp"
#include "report/runs.hpp"
#include "device/make_device.hpp"
#include "run/agent_run.hpp"
#include "run/bench_ablation.hpp"
#include "run/naming.hpp"
#include "run/population_grid.hpp"
#include "run/population_record.hpp"
#include "run/run.hpp"
#include "run/halving.hpp"
#include "run/search.hpp"
#include "run/session.hpp"
#include "trainers/population.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/fault.hpp"
#include "util/log.hpp"
#include "util/signals.hpp"

namespace fh::run {

namespace fs = std::filesystem;
namespace json = io::json;
using clock = std::chrono::steady_clock;

namespace {

std::function<void(int, trainers::Trainer&)>& agent_hook() {
    static std::function<void(int, trainers::Trainer&)> hook;
    return hook;
}

/// Runs body(t) for t = 0 .. threads - 1, each on its own thread (the calling thread runs t = 0),
/// and rethrows the first exception once all have ended.
void on_threads(std::size_t threads, const std::function<void(std::size_t)>& body) {
    std::vector<std::exception_ptr> errors(threads);
    const auto run = [&](std::size_t t) {
        try {
            body(t);
        } catch (...) {
            errors[t] = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

/// The devices, markets and trainers of the agents that train in this process.
struct PopulationSetup {
    /// Every agent's work done before the markets it reads go (memory is freed in the order of the
    /// stream of the device that holds it, not of the agents' own streams).
    ~PopulationSetup() {
        for (auto& d : devices) {
            try {
                d->synchronize();
            } catch (const std::exception& e) {
                log::error("population: {}", e.what());
            }
        }
    }
    std::vector<std::unique_ptr<ops::Device>> devices;  // destroyed last (members in reverse order)
    struct SharedMarket {
        data::MarketData market;
        std::unique_ptr<env::DeviceMarket> device_market;
    };
    std::map<std::string, std::unique_ptr<SharedMarket>> markets;
};

/// Markets are shared between agents whose data is the same: every agent's, except the synthetic
/// market, which each data seed (config::data_seed: run.seed unless data.seed is set) draws anew.
std::string market_key(const config::Profile& p) {
    return p.data.path.empty() ? fmt::format("synthetic:{}", config::data_seed(p)) : std::string("data");
}

/// The device `d` is on (every agent's device is the first agent's).
ops::DeviceSpec spec_of(ops::Device& d) {
    if (auto* c = d.cuda()) return {ops::DeviceSpec::Kind::cuda, c->device().ordinal};
    return {ops::DeviceSpec::Kind::cpu, 0};
}

std::unique_ptr<ops::Device> agent_device(const ops::DeviceSpec& spec, const config::Profile& p, int agents) {
    auto d = ops::make_device(spec, ops::CudaDevice::kAgentSideLanes);
    if (auto* cuda = d->cuda()) cuda->set_gpu_sharers(agents);  // launch shapes only: the same results
    d->set_precision(profile_precision(p));
    d->set_graphs(p.gpu.cuda_graphs);
    d->make_current();
    return d;
}

/// Devices (one per agent: on a GPU each agent's work goes to its own streams) and markets for the
/// members that train, after the checks a single run does, with the memory of every agent counted.
void set_up(PopulationSetup& s, std::vector<Member*>& training, bool force) {
    if (training.empty()) return;
    const config::Profile& first = training.front()->plan.profile;
    if (first.gpu.profile != "auto")
        log::warn("gpu.profile = \"{}\": named device classes are not implemented yet; the device is read at start",
                  first.gpu.profile);
    trainers::RunCheckOptions o;
    o.force = force;
    trainers::check_data_size(first, o);
    const int agents = static_cast<int>(training.size());
    auto device0 = agent_device(ops::parse_device_spec(first.run.device), first, agents);
    const ops::DeviceSpec spec = spec_of(*device0);
    log::info("device: {} ({} agents, each with its own streams)", device0->description(), training.size());
    o.host_backend = device0->cuda() == nullptr;
    s.devices.push_back(std::move(device0));
    // The markets first, on as many threads as there are cores (each seed draws its own synthetic
    // market: generating 16 of them one after the other took a quarter of a second).
    std::vector<const config::Profile*> firsts;  // the first agent of each market
    for (auto* m : training) {
        const std::string key = market_key(m->plan.profile);
        if (s.markets.emplace(key, std::make_unique<PopulationSetup::SharedMarket>()).second)
            firsts.push_back(&m->plan.profile);
    }
    const std::size_t threads = std::min<std::size_t>(firsts.size(), std::max(1u, std::thread::hardware_concurrency()));
    on_threads(threads, [&](std::size_t t) {
        for (std::size_t k = t; k < firsts.size(); k += threads)
            s.markets.at(market_key(*firsts[k]))->market = data::load_market(trainers::data_options(*firsts[k]));
    });
    std::vector<config::MemoryItem> total;
    for (std::size_t i = 0; i < training.size(); ++i) {
        const config::Profile& p = training[i]->plan.profile;
        if (i > 0) s.devices.push_back(agent_device(spec, p, agents));
        const trainers::RunSizes sizes = trainers::check_run(p, s.markets.at(market_key(p))->market, o);
        if (i == 0) total = sizes.device;
    }
    for (auto& item : total) {  // the first agent's, for every agent
        item.consumer = fmt::format("{} (x {} agents)", item.consumer, training.size());
        item.bytes *= training.size();
    }
    check_device_memory(*s.devices.front(), first, total);
    // Each market on the device of the first agent that uses it, complete before any other reads it.
    for (std::size_t i = 0; i < training.size(); ++i) {
        auto& m = *s.markets.at(market_key(training[i]->plan.profile));
        if (!m.device_market) {
            m.device_market = std::make_unique<env::DeviceMarket>(*s.devices[i], m.market);
            s.devices[i]->synchronize();
        }
    }
}

/// The per-agent keys but run.seed (each agent keeps its own): those a search's agent takes from another profile.
std::vector<const config::KeyDescriptor*> carried_keys() {
    std::vector<const config::KeyDescriptor*> out;
    for (const auto& k : agent_keys())
        if (k != "run.seed") out.push_back(find_dotted_key(k));
    return out;
}

/// The keys a search follows in an agent's lineage: those its grid line sets (drawn or not), run.seed aside.
json::Value searched_keys(const Member& m) {
    json::Object keys;
    for (const auto& g : m.plan.grid) {
        const std::string k = override_key(g);
        const auto* d = find_dotted_key(k);
        if (k == "run.seed" || d == nullptr) continue;
        const config::KeyValue v = config::get_value(m.plan.profile, *d);
        if (const auto* i = std::get_if<std::int64_t>(&v))
            keys.emplace_back(k, *i);
        else if (const auto* x = std::get_if<double>(&v))
            keys.emplace_back(k, *x);
    }
    return json::Value::object(std::move(keys));
}

/// The rounds a search has done: the largest "round" of the agents' lineage.jsonl (a resumed
/// population's files, cut back to their checkpoints).
long long rounds_done(const std::vector<Member*>& training) {
    long long done = 0;
    for (const Member* m : training) {
        if (!m->run) continue;
        for (const auto& line : report::read_jsonl((fs::path(m->run->path()) / "lineage.jsonl").string()))
            if (const auto r = integer_field(line, "round")) done = std::max<long long>(done, *r);
    }
    return done;
}

/// A search round's record: every live agent writes its checkpoint (a resume continues after the
/// round; not those in `no_checkpoint`, whose end writes it) and a line of its lineage.jsonl
/// (progress, round, metric, `extra`, keys).
void record_round(const std::vector<Member*>& training, long long round, const std::vector<double>& metric,
                  std::vector<json::Object>& extra, const std::vector<bool>& no_checkpoint) {
    for (std::size_t i = 0; i < training.size(); ++i) {
        Member& m = *training[i];
        if (!m.live) continue;
        if (no_checkpoint.empty() || !no_checkpoint[i]) m.run->save_checkpoint();
        trainers::Trainer& t = m.run->trainer();
        json::Object line{{t.progress_unit(), t.progress()}, {"round", round}, {"metric", metric[i]}};
        for (auto& kv : extra[i]) line.emplace_back(std::move(kv.first), std::move(kv.second));
        line.emplace_back("keys", searched_keys(m));
        m.run->append_lineage(json::serialize(json::Value::object(std::move(line))));
    }
}

/// One PBT round (docs/sweeps.md, "Population-based training"), the agents standing at its
/// iteration, each validated there: the live agents ranked on their validation metric, each of
/// the bottom search.fraction copies the state of one drawn from the top as many (weights,
/// target, Adam's moments; the replay with search.copy_replay), takes its per-agent keys and
/// explores those of its search space. Then every live agent writes its checkpoint (a resume
/// continues after the round) and a line of its lineage.jsonl.
void pbt_round(const config::Profile& base, std::int64_t seed, const std::vector<Member*>& training, long long round) {
    const std::size_t n = training.size();
    std::vector<double> metric(n, std::nan(""));
    std::vector<bool> live(n, false);
    for (std::size_t i = 0; i < n; ++i) {
        live[i] = training[i]->live;
        if (live[i] && training[i]->run->last_validation()) metric[i] = *training[i]->run->last_validation();
    }
    const auto exploits = plan_exploits(metric, live, base.search.fraction, static_cast<std::uint64_t>(seed),
                                        static_cast<std::uint64_t>(round));
    std::vector<json::Object> extra(n);
    for (const auto& e : exploits) {
        const auto a = static_cast<std::size_t>(e.agent), s = static_cast<std::size_t>(e.source);
        Member& dst = *training[a];
        const Member& src = *training[s];
        const auto tensors = copy_agent_state(dst.run->device(), dst.run->trainer(), src.run->device(),
                                              src.run->trainer(), base.search.copy_replay);
        // The copied agent's per-agent keys (the seed is the agent's own), then its space explored.
        std::vector<std::string> keys;
        for (const auto* d : carried_keys())
            keys.push_back(d->full_name() + "=" + config::toml_value_text(config::get_value(src.plan.profile, *d)));
        for (auto& k : explore_keys(dst.plan.space, src.plan.profile, base.search, static_cast<std::uint64_t>(seed),
                                    static_cast<std::uint64_t>(round), dst.plan.index))
            keys.push_back(std::move(k));
        dst.run->set_agent_keys(config::resolve_profile_text(
            config::to_toml(dst.plan.profile), (fs::path(dst.run->path()) / "config.toml").string(), keys));
        dst.plan.profile = dst.run->profile();
        extra[a] = json::Object{{"copied", src.plan.index},
                                {"copied_run", src.plan.name},
                                {"copied_metric", metric[s]},
                                {"tensors", json::array_of<std::string>(tensors)}};
        log::info("agent {}: PBT round {}: copies agent {} ({} {:.4f} against {:.4f}), explores {}", dst.plan.index,
                  round, src.plan.index, base.early_stopping.metric, metric[s], metric[a],
                  json::serialize(searched_keys(dst)));
    }
    record_round(training, round, metric, extra, {});
}

/// The market of agent `p` (set_up loads the first agents'; a halving search's new point may draw
/// a synthetic market of its own seed, loaded and checked here as set_up checks the first ones).
const PopulationSetup::SharedMarket& point_market(PopulationSetup& s, const config::Profile& p, ops::Device& device,
                                                  bool force) {
    auto& m = s.markets[market_key(p)];
    if (m && m->device_market) return *m;
    if (!m) {
        m = std::make_unique<PopulationSetup::SharedMarket>();
        m->market = data::load_market(trainers::data_options(p));
    }
    trainers::RunCheckOptions o;
    o.force = force;
    o.host_backend = device.cuda() == nullptr;
    (void)trainers::check_run(p, m->market, o);
    m->device_market = std::make_unique<env::DeviceMarket>(device, m->market);
    device.synchronize();
    return *m;
}

/// summary.json's "search" of a halving agent that ends without being stopped: one that trained its
/// full budget reached the top rung (halving_top_rung) with its last validation; one that stopped
/// early (early stopping) the last rung its lineage.jsonl records.
json::Value halving_end(const config::Profile& base, Member& m) {
    json::Value rung(std::int64_t{-1}), metric;
    if (m.run->status() == "completed") {
        rung = halving_top_rung(base.search.eta, search_interval(base), m.plan.profile.run.total_steps);
        metric = m.run->last_validation();
    } else {
        for (const auto& line : report::read_jsonl((fs::path(m.run->path()) / "lineage.jsonl").string()))
            if (const auto* k = field(line, "rung"); k != nullptr && k->is_integer()) {
                rung = *k;
                metric = line.find("metric") != nullptr ? *line.find("metric") : json::Value();
            }
    }
    return json::object({{"method", "halving"}, {"rung", rung}, {"metric", metric}});
}

/// Successive halving's next point (docs/sweeps.md, "Successive halving"): point j =
/// members.size() is modelled on agent j mod `population` (its grid line and search space), its
/// seed the population's (agent 0's) + j, its space drawn from that seed (halving_point_line), and
/// it starts at `round`.
Member halving_point(const Where& where, const config::Profile& base, const std::vector<Member>& members,
                     std::size_t population, long long round) {
    const auto j = static_cast<int>(members.size());
    const Member& model = members[static_cast<std::size_t>(j) % population];
    if (model.plan.index != j % static_cast<int>(population))
        throw std::logic_error("halving: the population's first agents are not in order");
    Member m;
    m.plan.index = j;
    m.plan.seed = members.front().plan.seed + j;
    m.plan.space = model.plan.space;
    m.plan.grid = halving_point_line(model.plan.grid, model.plan.space, m.plan.seed);
    std::vector<std::string> keys = m.plan.grid;
    keys.push_back(fmt::format("run.seed={}", m.plan.seed));
    for (const auto& o : model.plan.overrides)  // the single run's overrides: the model's, its line drawn again
        if (std::none_of(keys.begin(), keys.end(), [&](const auto& k) { return override_key(k) == override_key(o); }))
            m.plan.overrides.push_back(o);
    m.plan.overrides.insert(m.plan.overrides.end(), keys.begin(), keys.end());
    m.plan.profile = config::resolve_profile_text(
        config::to_toml(model.plan.profile), (fs::path(where.agents) / model.plan.name / "config.toml").string(), keys);
    if (where.flat) {  // as --auto-name names its single run (the population's run.name its base)
        config::Profile named = m.plan.profile;
        named.run.name = base.run.name;
        m.plan.name = derived_run_name(named, m.plan.overrides);
    } else {  // named by what differs from its model (its drawn keys and seed), as the first agents are
        m.plan.name = agent_run_names({model.plan.profile, m.plan.profile}).back();
        if (std::any_of(members.begin(), members.end(), [&](const Member& x) { return x.plan.name == m.plan.name; }))
            m.plan.name += fmt::format(",point={}", j);
    }
    m.plan.profile.run.name = m.plan.name;
    m.start_round = round;
    return m;
}

/// One round of successive halving (docs/sweeps.md, "Successive halving"), every live agent at the
/// round's iteration, validated there: each agent that stands at a rung of its own training
/// (halving_rung) goes on or stops (halving_decisions, against the rungs every point's
/// lineage.jsonl records), every live agent records the round (record_round), the stopped ones
/// end as finished runs (status "stopped", `end`), and each empty slot of the `population` starts
/// a new point (halving_point, `start`) while search.max_points allows.
void halving_round(const Where& where, const config::Profile& base, std::vector<Member>& members,
                   std::vector<Member*>& training, std::size_t population, long long round,
                   const std::function<void(Member*)>& end, const std::function<void(std::size_t, Member&)>& start) {
    const long long interval = search_interval(base);
    const std::size_t n = training.size();
    std::vector<double> metric(n, std::nan(""));
    std::vector<RungEntry> arrivals;
    std::vector<std::size_t> arriving;
    for (std::size_t i = 0; i < n; ++i) {
        const Member& m = *training[i];
        if (!m.live) continue;
        if (m.run->last_validation()) metric[i] = *m.run->last_validation();
        const int k = halving_rung(round - m.start_round, base.search.eta, interval, m.plan.profile.run.total_steps);
        if (k < 0) continue;
        arrivals.push_back({k, metric[i], round, m.plan.index});
        arriving.push_back(i);
    }
    std::vector<RungEntry> history;  // the rungs of earlier rounds, every point's
    for (const auto& m : members)
        for (const auto& line : report::read_jsonl((fs::path(where.agents) / m.plan.name / "lineage.jsonl").string())) {
            const auto k = integer_field(line, "rung"), r = integer_field(line, "round");
            if (k && r && *r < round)
                history.push_back({static_cast<int>(*k), number_or_nan(line.find("metric")), *r, m.plan.index});
        }
    const std::vector<bool> on = halving_decisions(history, arrivals, base.search.eta);
    std::vector<json::Object> extra(n);
    std::vector<bool> stopping(n, false);
    for (std::size_t a = 0; a < arrivals.size(); ++a) {
        const std::size_t i = arriving[a];
        stopping[i] = !on[a];
        extra[i].emplace_back("rung", arrivals[a].rung);
        extra[i].emplace_back("decision", on[a] ? "continued" : "stopped");
        log::info("agent {}: halving round {}: rung {} ({} {:.4f}): {}", training[i]->plan.index, round,
                  arrivals[a].rung, base.early_stopping.metric, metric[i], on[a] ? "goes on" : "stopped");
    }
    record_round(training, round, metric, extra, stopping);
    for (std::size_t a = 0; a < arrivals.size(); ++a) {
        Member* m = training[arriving[a]];
        if (on[a]) continue;
        m->run->set_search_result(json::object(
            {{"method", "halving"}, {"rung", arrivals[a].rung}, {"metric", metric[arriving[a]]}, {"round", round}}));
        m->run->stop();
        end(m);
    }
    // The empty slots (stopped now, or ended since the last round) take new points.
    const auto points = static_cast<std::size_t>(halving_points(base.search, population));
    std::size_t occupied = static_cast<std::size_t>(
        std::count_if(training.begin(), training.end(), [](const Member* m) { return m->live; }));
    std::size_t slot = 0;
    while (occupied < population && members.size() < points) {
        while (slot < training.size() && training[slot]->live) ++slot;
        if (members.size() == members.capacity()) throw std::logic_error("halving: no room for a new point");
        members.push_back(halving_point(where, base, members, population, round));
        Member& m = members.back();
        log::info("agent {}: halving round {}: a new point in slot {}: {}", m.plan.index, round, slot,
                  fmt::join(m.plan.grid, " "));
        start(slot, m);
        m.run->begin();
        ++occupied;
    }
}

/// The counters of member `m`'s last checkpoint in `dir` (trainers::checkpoint_counters).
std::vector<std::int64_t> last_checkpoint_counters(const std::string& dir, const Member& m) {
    return trainers::checkpoint_counters((fs::path(dir) / m.plan.name / "checkpoints" / "last.safetensors").string());
}

/// A resumed halving search's members in one batched engine (each agent with its own counters):
/// every point, resumed or started again, must stand at one iteration of the search (its start
/// round's plus its checkpoint's own iterations, the checkpoint's first counter: DQN's collection
/// steps), and the engine needs a slot for every new point the search may still add (`slots`).
std::string halving_resume_unbatched(const std::vector<Member*>& training, const std::string& dir, std::size_t slots,
                                     std::size_t members) {
    const config::Profile& first = training.front()->plan.profile;
    if (training.size() < slots && members < static_cast<std::size_t>(halving_points(first.search, slots)))
        return "a resumed successive halving search with fewer unfinished points than slots";
    const long long per_round = search_interval(first) / trainers::batched_refill_unit(first);
    std::optional<long long> at;
    for (const Member* m : training) {
        long long own = 0;
        if (m->action == AgentAction::resume)
            if (const auto c = last_checkpoint_counters(dir, *m); !c.empty()) own = c.front();
        const long long it = m->start_round * per_round + own;
        if (at && *at != it)
            return "its points resume from checkpoints of different iterations of the search (a checkpoint "
                   "between rounds)";
        at = it;
    }
    return "";
}

/// unbatched_reason for the members that train in this process (`dir`: where their run
/// directories are). Resuming members batch when every member resumes and their checkpoints stand
/// at one iteration (a halving search: halving_resume_unbatched, `slots` its slots, `members` the
/// points drawn so far).
std::string unbatched_because(const std::vector<Member*>& training, const std::string& dir = "", std::size_t slots = 0,
                              std::size_t members = 0) {
    std::vector<const config::Profile*> agents;
    std::size_t resuming = 0;
    for (const Member* m : training) {
        agents.push_back(&m->plan.profile);
        if (m->action == AgentAction::resume) ++resuming;
    }
    // The checkpoints are read only for agents that would batch otherwise.
    if (std::string why = unbatched_reason(agents); !why.empty() || resuming == 0) return why;
    if (training.front()->plan.profile.run.search == "halving")
        return halving_resume_unbatched(training, dir, slots, members);
    if (resuming < training.size()) return "some of its agents resume from checkpoints and others start";
    const std::vector<std::int64_t> first = last_checkpoint_counters(dir, *training.front());
    for (std::size_t i = 1; i < training.size(); ++i)
        if (last_checkpoint_counters(dir, *training[i]) != first)
            return "its agents resume from checkpoints of different iterations (or, DQN, with replay memories of "
                   "different fills: a checkpoint written with checkpoint.keep_replay = false holds none)";
    return "";
}

/// The batched engine of the members, on the first agent's device, each agent on its market.
std::shared_ptr<trainers::BatchedPopulation> make_population_engine(PopulationSetup& setup,
                                                                    const std::vector<Member*>& training) {
    std::vector<config::Profile> profiles;
    std::vector<const env::DeviceMarket*> markets;
    for (const auto* m : training) {
        profiles.push_back(m->plan.profile);
        markets.push_back(setup.markets.at(market_key(m->plan.profile))->device_market.get());
    }
    return trainers::make_batched_population(*setup.devices.front(), profiles, markets);
}

/// Host threads for a population's agents; agent i belongs to worker i % workers. Each agent's
/// ops go to its own device (its own streams on a GPU) and its files to its own directory, so the
/// workers share nothing but the read-only market and population.json (under a lock). On the CPU
/// backend the agents' arithmetic runs on these threads: one per core. On a GPU the threads only
/// launch work and run the backtests' host steps: one per four cores (measured on an H200 host
/// with 16 cores, 16 agents: 4 workers train 16 dqn-smoketest agents in 1.8 s against 3.5 s for 1
/// and 1.8 s for 16, and keep 97 % of 1 worker's update rate, which 16 workers cut by 10 to 30 %
/// as the threads contend in the driver; docs/performance.md).
std::size_t agent_workers(std::size_t agents, bool gpu) {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t threads = gpu ? std::max<std::size_t>(1, cores / 4) : cores;
    return std::max<std::size_t>(1, std::min(agents, threads));
}

/// on_threads with `devices[w]` made current on worker w's thread (the agents' devices share one GPU).
void on_workers(std::size_t workers, const std::vector<std::unique_ptr<ops::Device>>& devices,
                const std::function<void(std::size_t)>& body) {
    on_threads(workers, [&](std::size_t w) {
        devices[w]->make_current();
        body(w);
    });
}

/// Trains the members in `dir` on host workers (agent_workers); returns the population's outcome.
void run_members(const Where& where, const config::Profile& base, std::vector<Member>& members, bool force,
                 clock::time_point t0, const std::vector<std::string>& resume_overrides) {
    const std::string& dir = where.agents;
    // Successive halving: the population's slots (its first agents, those that started at round 0)
    // and room for every point the search may add (`training` points into `members`).
    const auto slots = static_cast<std::size_t>(
        std::count_if(members.begin(), members.end(), [](const Member& m) { return m.start_round == 0; }));
    if (base.run.search == "halving")
        members.reserve(
            std::max<std::size_t>(members.size(), static_cast<std::size_t>(halving_points(base.search, slots))));
    std::vector<Member*> training;
    for (auto& m : members)
        if (m.action != AgentAction::done) training.push_back(&m);
    // A resumed search's agents train on with the keys their rounds gave them (their config.toml),
    // whatever profile the command resolved (run.on_exists = "resume" plans from the grid).
    if (base.run.search != "none")
        for (Member* m : training) {
            if (m->action != AgentAction::resume) continue;
            const config::Profile saved =
                config::resolve_profile_file((fs::path(dir) / m->plan.name / "config.toml").string());
            for (const auto* d : carried_keys()) config::set_value(m->plan.profile, *d, config::get_value(saved, *d));
        }
    write_population_json(where, base, members);  // first: a population stopped while it starts resumes too
    PopulationSetup setup;
    set_up(setup, training, force);
    util::fault_point("population-setup");
    // A batched population: one engine on the first agent's device, each agent a view of it, all
    // advanced by one worker (one iteration of every agent a round).
    std::shared_ptr<trainers::BatchedPopulation> batched;
    // On every way out, an error included: each agent's run (its trainer, its buffers) goes
    // before the engine, then the engine before the devices and markets (`setup`) they live on.
    // (The members outlive this function; their runs must not.)
    struct ReleaseRuns {
        std::vector<Member>& members;
        ~ReleaseRuns() {
            for (auto& m : members) m.run.reset();
        }
    } release_runs{members};
    // A batched population's interrupt, latched at the start of each round (AgentOptions).
    std::atomic<bool> round_interrupt{false};
    if (const std::string why = unbatched_because(training, dir, slots, members.size()); why.empty()) {
        batched = make_population_engine(setup, training);
        util::fault_point("population-engine");
        log::info("population: one batched engine for the {} agents (every op one launch for all of them)",
                  training.size());
    } else if (training.size() > 1) {
        log::info("population: each agent its own launches ({})", why);
    }
    // Starts member m in slot i: its trainer, run directory and AgentRun; a search's new agent
    // records its keys at its start. (A halving search's new point may take a slot of its own;
    // batched, it takes the slot's place in the engine, started again from scratch.)
    const long long interval = search_interval(base);
    bool engine_started = false;  // the batched engine's first agents have their Trainers
    const auto start = [&](std::size_t i, Member& m) {
        const config::Profile& p = m.plan.profile;
        if (i == training.size()) training.push_back(&m);
        training[i] = &m;
        if (setup.devices.size() <= i)  // a halving search's slot beyond those it started with
            setup.devices.push_back(agent_device(spec_of(*setup.devices.front()), p, static_cast<int>(i + 1)));
        ops::Device& dev = batched ? *setup.devices.front() : *setup.devices[i];
        const auto& shared = point_market(setup, p, dev, force);
        if (batched && engine_started) batched->reset_agent(static_cast<int>(i), p, *shared.device_market);
        std::unique_ptr<trainers::Trainer> trainer =
            batched ? batched->agent(static_cast<int>(i)) : trainers::make_trainer(dev, p, *shared.device_market);
        if (agent_hook()) agent_hook()(m.plan.index, *trainer);
        const std::string agent_dir = (fs::path(dir) / m.plan.name).string();
        const bool resuming = m.action == AgentAction::resume;
        auto rd = resuming ? io::RunDirectory::open(agent_dir) : io::RunDirectory::create(dir, m.plan.name);
        if (rd.path() != agent_dir) {
            if (!where.flat)
                throw UsageError(fmt::format("{} exists already: the agent's run directory must be new", agent_dir));
            m.plan.name = fs::path(rd.path()).filename().string();  // run.on_exists = "new" beside an existing run
        }
        m.done_by = resuming ? "resumed" : "trained";
        AgentOptions o;
        o.overrides = m.plan.overrides;
        if (resuming) {
            o.resume_dir = agent_dir;
            for (const auto& r : resume_overrides) o.overrides.push_back(r);
        }
        o.progress_bar = false;
        o.log_prefix = fmt::format("agent {}: ", m.plan.index);
        if (batched) o.interrupt_requested = [&round_interrupt] { return round_interrupt.load(); };
        m.run = std::make_unique<AgentRun>(p, dev, shared.market, *shared.device_market, std::move(trainer),
                                           std::move(rd), resuming, std::move(o), t0);
        m.status = "running";
        m.live = true;
        if (interval > 0 && m.action == AgentAction::create)  // a search's first record: the keys at the start
            m.run->append_lineage(json::serialize(json::object(
                {{m.run->trainer().progress_unit(), 0}, {"round", m.start_round}, {"keys", searched_keys(m)}})));
    };
    for (std::size_t i = 0; i < training.size(); ++i) start(i, *training[i]);
    engine_started = true;
    write_population_json(where, base, members);
    signals::install_interrupt_handlers();
    for (auto* m : training) m->run->begin();
    // Each worker advances its agents in turn; an agent that ends (finished, early-stopped,
    // diverged or interrupted) leaves alone and the others go on. A search (run.search) stops
    // every agent at the iteration of its next round, runs the round, and goes on.
    const std::size_t workers = batched ? 1 : agent_workers(training.size(), setup.devices.front()->cuda() != nullptr);
    const long long per = training.front()->run->trainer().progress_per_iteration();
    long long round = interval > 0 ? rounds_done(training) : 0;
    std::mutex record;  // population.json and the members' status
    const auto end_member = [&](Member* m) {
        m->live = false;
        if (m->run->status() == "diverged") {
            log::error("agent {}: {} (the other agents go on)", m->plan.index, m->run->error());
        } else {
            if (base.run.search == "halving" && m->run->status() != "stopped" && m->run->status() != "interrupted")
                m->run->set_search_result(halving_end(base, *m));
            m->run->finish();
        }
        const std::string status = m->run->status();
        m->run.reset();  // its trainer's device memory back
        const std::lock_guard lock(record);
        m->status = status;
        write_population_json(where, base, members);
    };
    while (std::any_of(training.begin(), training.end(), [](const Member* m) { return m->live; })) {
        // Each agent's iteration of the next round (none without a search; a halving search's new
        // point counts its iterations from the round it started at).
        const auto stop = [&](const Member* m) {
            return interval > 0 ? ((round + 1 - m->start_round) * interval + per - 1) / per
                                : std::numeric_limits<long long>::max();
        };
        for (auto* m : training)
            if (m->live) m->run->hold_interrupt_at(stop(m));
        const auto waiting = [&stop](const Member* m) { return m->run->trainer().iterations() >= stop(m); };
        on_workers(workers, setup.devices, [&](std::size_t w) {
            std::vector<Member*> mine;
            for (std::size_t i = w; i < training.size(); i += workers)
                if (training[i]->live) mine.push_back(training[i]);
            std::size_t going = std::count_if(mine.begin(), mine.end(), [&](const Member* m) { return !waiting(m); });
            while (going > 0) {
                round_interrupt = signals::interrupt_requested();
                for (auto* m : mine)  // every agent's work issued before any waits (PPO's rollouts)
                    if (m->live && !waiting(m)) m->run->prepare();
                for (auto* m : mine) {
                    if (!m->live || waiting(m)) continue;
                    if (m->run->step()) {
                        if (waiting(m)) --going;
                        continue;
                    }
                    --going;
                    end_member(m);
                }
            }
        });
        if (interval == 0) break;
        // Every live agent stands at the round's iteration, validated there. An interrupt now, or
        // one that stopped an agent before it, stops them all before the round (a resume runs it).
        const bool interrupted =
            signals::interrupt_requested() ||
            std::any_of(training.begin(), training.end(), [](const Member* m) { return m->status == "interrupted"; });
        if (interrupted)
            for (auto* m : training)
                if (m->live) {
                    m->run->interrupt();
                    end_member(m);
                }
        // (A halving search whose agents all ended between rounds starts its next points at the round.)
        if (interrupted || (base.run.search != "halving" &&
                            !std::any_of(training.begin(), training.end(), [](const Member* m) { return m->live; })))
            break;
        ++round;
        if (base.run.search == "halving")
            halving_round(where, base, members, training, slots, round, end_member, start);
        else
            pbt_round(base, members.front().plan.seed, training, round);
        const std::lock_guard lock(record);
        write_population_json(where, base, members);
    }
}

std::string outcome(const Where& where, const std::vector<Member>& members) {
    const std::string& dir = where.flat ? where.record : where.agents;
    std::vector<std::string> diverged, interrupted;
    for (const auto& m : members) {
        if (m.status == "diverged") diverged.push_back(std::to_string(m.plan.index));
        if (m.status == "interrupted") interrupted.push_back(std::to_string(m.plan.index));
    }
    if (!interrupted.empty())
        throw InterruptedError(fmt::format(
            "population interrupted: agents {} wrote their checkpoints; continue with {}", fmt::join(interrupted, ","),
            where.flat ? "the same command (run.on_exists = \"resume\")" : "--resume " + dir));
    if (!diverged.empty())
        throw DivergedError(
            fmt::format("population {}: agent(s) {} diverged (their summary.json says why); the others finished", dir,
                        fmt::join(diverged, ",")));
    log::info("population done: {} agents in {}", members.size(), where.agents);
    return where.flat ? where.agents : dir;
}

/// Decides each member's action from its directory (a resumed population, run.on_exists = resume;
/// a flat population applies run.on_exists to each agent's directory as a single run would).
void place_members(const std::string& dir, std::vector<Member>& members, const std::string& mode = "resume") {
    for (auto& m : members) {
        const fs::path agent = fs::path(dir) / m.plan.name;
        std::error_code ec;
        if (!fs::exists(agent, ec) || mode == "new") {
            m.action = AgentAction::create;
            continue;
        }
        const std::string status = summary_status(agent.string());
        if (mode == "error")
            throw UsageError(
                fmt::format("run directory {} exists ({}) and run.on_exists = \"error\"; remove it, rename "
                            "the run or set run.on_exists to new, skip or resume",
                            agent.string(), status.empty() ? "no summary.json" : "status " + status));
        const bool finished =
            status == "completed" || status == "early_stopped" || status == "diverged" || status == "stopped";
        if (mode == "skip" || finished) {
            m.action = AgentAction::done;
            m.status = status.empty() ? "unfinished" : status;
            m.done_by = "skipped";
            log::info("agent {}: {} exists ({}): left as it is", m.plan.index, agent.string(),
                      status.empty() ? "no summary.json" : status);
        } else if (fs::is_regular_file(agent / "checkpoints" / "last.safetensors", ec)) {
            m.action = AgentAction::resume;
        } else {  // stopped before its first checkpoint: started again, unless a process runs there
            const io::DirectoryLock lock(agent.string());
            fs::remove_all(agent, ec);
            if (ec)
                throw UsageError(
                    fmt::format("cannot remove {} to start the agent again: {}", agent.string(), ec.message()));
            m.action = AgentAction::create;
        }
    }
}

}  // namespace

bool wants_population(const config::Profile& p, const PopulationRequest& r) {
    return p.run.population > 1 || !r.seeds.empty() || !r.grid_file.empty();
}

void refuse_search_without_population(const config::Profile& p) {
    if (p.run.search != "none")
        throw UsageError(fmt::format(
            "run.search = \"{}\" searches inside a population: give run.population > 1, --seeds or "
            "--population-grid (docs/sweeps.md); an agent of a search resumes with its population (--resume POPDIR)",
            p.run.search));
}

void set_agent_hook_for_tests(std::function<void(int, trainers::Trainer&)> hook) {
    agent_hook() = std::move(hook);
}

PopulationPlan plan_population(const std::string& profile_file, const config::Profile& base,
                               const std::vector<std::string>& overrides, const PopulationRequest& r, bool auto_name) {
    PopulationPlan plan;
    plan.base = base;
    // The command line's overrides every agent shares (the seed and the population are the agent's).
    std::vector<std::string> shared;
    for (const auto& o : overrides) {
        const std::string k = override_key(o);
        if (k != "run.seed" && k != "run.population") shared.push_back(o);
    }
    if (!r.seeds.empty() && base.run.population > 1 && static_cast<std::size_t>(base.run.population) != r.seeds.size())
        throw UsageError(fmt::format("--seeds names {} seeds but run.population = {}: give one of them", r.seeds.size(),
                                     base.run.population));
    std::vector<std::int64_t> seeds = r.seeds;
    if (seeds.empty())
        for (std::int64_t i = 0; i < base.run.population; ++i) seeds.push_back(base.run.seed + i);

    const std::vector<GridLine> lines =
        r.grid_file.empty() ? std::vector<GridLine>{GridLine{0, {}}} : read_grid(r.grid_file, profile_file, shared);
    // Each line's seeds: every seed, or none of them (nullopt) for a line that sets run.seed.
    std::vector<std::vector<std::optional<std::int64_t>>> line_seeds;
    std::size_t count = 0;
    for (const auto& line : lines) {
        const bool own_seed = std::any_of(line.tokens.begin(), line.tokens.end(),
                                          [](const GridToken& t) { return override_key(t.text) == "run.seed"; });
        line_seeds.push_back(own_seed ? std::vector<std::optional<std::int64_t>>{std::nullopt}
                                      : std::vector<std::optional<std::int64_t>>(seeds.begin(), seeds.end()));
        count += line_seeds.back().size();
    }
    if (count > kMaxAgents)
        throw UsageError(fmt::format(
            "the population has {} agents (seeds x grid lines); at most {} train in one process", count, kMaxAgents));

    for (std::size_t l = 0; l < lines.size(); ++l) {
        const GridLine& line = lines[l];
        for (const auto& seed : line_seeds[l]) {
            AgentPlan a;
            a.index = static_cast<int>(plan.agents.size());
            a.overrides = shared;
            try {
                // The agent's seed first (its line's values and seed), then its search spaces drawn
                // from that seed: the same agent draws the same point in any population.
                std::vector<std::string> fixed = a.overrides;
                for (const auto& t : line.tokens)
                    if (!token_distribution(r.grid_file, t)) fixed.push_back(t.text);
                if (seed) fixed.push_back(fmt::format("run.seed={}", *seed));
                const config::Profile seeded = config::resolve_profile_file(profile_file, fixed);
                for (const auto& t : line.tokens) {  // the line with its search spaces drawn
                    if (auto d = token_distribution(r.grid_file, t)) {
                        a.grid.push_back(
                            d->key + "=" +
                            draw_value(*d, static_cast<std::uint64_t>(seeded.run.seed), key_stream(d->key), 0));
                        a.space.push_back(std::move(*d));
                    } else {
                        a.grid.push_back(t.text);
                    }
                }
                a.overrides.insert(a.overrides.end(), a.grid.begin(), a.grid.end());
                if (seed) a.overrides.push_back(fmt::format("run.seed={}", *seed));
                a.profile = config::resolve_profile_file(profile_file, a.overrides);
            } catch (const config::ProfileError& e) {
                std::vector<std::string> problems;
                for (const auto& p : e.problems())
                    problems.push_back(line.line > 0
                                           ? fmt::format("{}:{}: agent {}: {}", r.grid_file, line.line, a.index, p)
                                           : fmt::format("agent {}: {}", a.index, p));
                throw config::ProfileError(problems);
            }
            a.seed = a.profile.run.seed;
            a.profile.run.population = 1;
            plan.agents.push_back(std::move(a));
        }
    }
    if (base.run.search != "none" && plan.agents.size() < 2)
        throw UsageError(fmt::format("run.search = \"{}\" needs a population of at least 2 agents, not {}",
                                     base.run.search, plan.agents.size()));
    if (base.run.search == "halving" &&
        halving_points(base.search, plan.agents.size()) < static_cast<long long>(plan.agents.size()))
        throw UsageError(fmt::format(
            "search.max_points = {} is below the population's {} agents: the search trains them all, then new "
            "points while search.max_points allows (0 = search.eta x the agents)",
            base.search.max_points, plan.agents.size()));
    // Each agent's run directory: named by what differs between the agents in the population's
    // directory; flat (beside single runs), as --auto-name names the single run.
    std::vector<config::Profile> profiles;
    for (const auto& a : plan.agents) profiles.push_back(a.profile);
    const std::vector<std::string> agent_names = agent_run_names(profiles);
    std::map<std::string, int> names;
    for (auto& a : plan.agents) {
        a.name = r.flat ? derived_run_name(a.profile, a.overrides) : agent_names[static_cast<std::size_t>(a.index)];
        a.profile.run.name = a.name;
        if (const auto [it, fresh] = names.emplace(a.name, a.index); !fresh)
            throw UsageError(
                fmt::format("agents {} and {} would be the same run ({}): give each agent another seed "
                            "or other overrides",
                            it->second, a.index, a.name));
    }
    if (auto_name) {
        std::string name = derived_run_name(base, shared);
        const auto cut = name.rfind(",seed=");
        if (cut != std::string::npos && name.find('~') == std::string::npos) name.resize(cut);
        plan.name = name + ",population";
    } else {
        plan.name = run_name(base);
    }
    return plan;
}

bool is_population_directory(const std::string& dir) {
    std::error_code ec;
    return fs::is_regular_file(fs::path(dir) / "population.json", ec);
}

std::string train_population(const PopulationPlan& plan, bool force) {
    const auto t0 = clock::now();
    const config::Profile& base = plan.base;
    std::vector<Member> members;
    for (const auto& a : plan.agents) members.push_back(Member{a, AgentAction::create, "", "", nullptr, false});
    const std::string& mode = base.run.on_exists;
    std::error_code ec;
    Where where;
    std::optional<io::DirectoryLock> lock;  // the population directory's, while it trains
    if (!plan.record.empty()) {             // flat: the agents in run.output_dir, each placed as a single run
        where.flat = true;
        where.agents = base.run.output_dir;
        where.record = plan.record;
        fs::create_directories(where.agents, ec);
        if (ec) throw UsageError(fmt::format("cannot create {}: {}", where.agents, ec.message()));
        if (base.run.search == "halving" && mode == "resume") adopt_recorded_points(where, members);
        place_members(where.agents, members, mode);
        log::info("population: {} agents of {} in {} (population.json: {})", members.size(), base.run.trainer,
                  where.agents, where.record);
    } else {
        const fs::path wanted = fs::path(base.run.output_dir) / plan.name;
        const bool exists = !base.run.name.empty() && fs::exists(wanted, ec);
        if (exists && mode != "new") {
            if (!fs::is_directory(wanted, ec))
                throw UsageError(fmt::format("{} exists and is not a directory; remove it or choose another run.name",
                                             wanted.string()));
            if (mode == "error")
                throw UsageError(
                    fmt::format("population directory {} exists and run.on_exists = \"error\"; remove it, "
                                "rename the population or set run.on_exists to new, skip or resume",
                                wanted.string()));
            if (mode == "skip") {
                log::info("population directory {} exists: skipped (run.on_exists = \"skip\")", wanted.string());
                return wanted.string();
            }
            if (!is_population_directory(wanted.string()))
                throw UsageError(
                    fmt::format("{} exists and holds no population.json: it is not a population this "
                                "version can resume; remove it to start the population again",
                                wanted.string()));
            where.agents = wanted.string();
            lock.emplace(where.agents, "population directory");
            adopt_recorded_names(where.agents, members);
            if (base.run.search == "halving")
                adopt_recorded_points({where.agents, (wanted / "population.json").string(), false}, members);
            place_members(where.agents, members);
            log::info("population directory {} exists: unfinished agents resumed (run.on_exists = \"resume\")",
                      where.agents);
        } else {
            if (exists)
                log::info("{} exists (run.on_exists = \"new\"): a new directory is made beside it", wanted.string());
            where.agents = io::RunDirectory::create(base.run.output_dir, plan.name).path();
            lock.emplace(where.agents, "population directory");
        }
        where.record = (fs::path(where.agents) / "population.json").string();
        log::info("population: {} agents of {} in {}", members.size(), base.run.trainer, where.agents);
        for (auto& m : members) m.plan.profile.run.output_dir = where.agents;
    }
    if (std::all_of(members.begin(), members.end(), [](const Member& m) { return m.action == AgentAction::done; }))
        write_population_json(where, base, members);
    else
        run_members(where, base, members, force, t0, {});
    return outcome(where, members);
}

std::string resume_population(const std::string& dir, const std::vector<std::string>& overrides, bool force) {
    const auto t0 = clock::now();
    const io::DirectoryLock lock(dir, "population directory");
    Where where{dir, (fs::path(dir) / "population.json").string(), false};
    std::vector<Member> members = read_population_json(dir, overrides);
    const config::Profile base = members.front().plan.profile;
    place_members(dir, members);
    if (std::all_of(members.begin(), members.end(), [](const Member& m) { return m.action == AgentAction::done; }))
        throw UsageError(fmt::format("--resume {}: every agent is finished; their files are left as they are", dir));
    run_members(where, base, members, force, t0, overrides);
    return outcome(where, members);
}

namespace {

/// bench_population for agents that train as one trainers::BatchedPopulation: the same phases (the
/// untimed warm-up, collection steps alone, updates alone, whole iterations; an offline trainer's
/// collection and whole iterations are not timed, as for one agent), each a call of the engine for
/// every agent at once.
std::string bench_batched_population(const config::Profile& p, PopulationSetup& setup,
                                     const std::vector<Member*>& training, clock::time_point t_start, bool ablate,
                                     bool kernel_times) {
    ops::Device& dev = *setup.devices.front();
    auto population = make_population_engine(setup, training);
    dev.synchronize();
    BenchFigures b;
    b.batched = true;
    b.device = dev.description();
    b.first_kernel_s = seconds_since(t_start);
    const long long per = population->env_steps_per_iteration();
    // Phases of one agent's progress units (env steps; an offline trainer's updates), as bench_population's.
    b.phase = bench_phase_iterations(p.run.total_steps, per > 0 ? per : 1);
    b.batch_rows = population->batch_rows();
    b.dataset_rate = population->dataset_collection_env_steps_per_s();
    const long long agents = population->agents();
    BenchPhases phases;
    phases.collect = [&](long long k) {
        for (long long i = 0; i < k; ++i) population->collect();
        return k * per * agents;
    };
    phases.update = [&](long long k) {
        for (long long i = 0; i < k; ++i) population->update();
        return k * agents * population->updates_per_update();
    };
    phases.iterate = [&](long long k) {
        for (long long i = 0; i < k; ++i) population->iterate();
        return k * per * agents;
    };
    phases.synchronize = [&] { dev.synchronize(); };
    phases.collects = per > 0;
    population->prepare();
    population->collect();
    population->update();
    population->iterate();
    dev.synchronize();
    b.t = time_phases(phases, b.phase);
    for (auto& d : setup.devices) b.peak += d->peak_bytes();
    json::Object out = bench_json(p, b, training.size());
    // The diagnostics, as one agent's bench: each op of a batched collection step and update timed
    // alone (per batched step: every agent's work), and left out of the captured phases (per agent).
    if ((kernel_times || ablate) && dev.cuda()) {
        constexpr long long kRuns = 20;
        cuda::set_kernel_timing(true);
        (void)cuda::collect_kernel_times();
        (void)phases.collect(kRuns);
        auto collect_ops = cuda::collect_kernel_times();
        (void)phases.update(kRuns);
        auto update_ops = cuda::collect_kernel_times();
        cuda::set_kernel_timing(false);
        // (An offline trainer's collection has no ops: per = 0.)
        if (ablate)
            out.emplace_back("ablation",
                             ablation_tables(phases, b.t, collect_ops, update_ops, static_cast<double>(per), b.phase));
        if (kernel_times) {
            json::Object times;
            if (per > 0) times.emplace_back("collection", kernel_table(std::move(collect_ops), kRuns));
            times.emplace_back("update", kernel_table(std::move(update_ops), kRuns));
            out.emplace_back("kernel_times", json::Value::object(std::move(times)));
        }
    }
    return json::serialize(json::Value::object(std::move(out)));
}

}  // namespace

std::string unbatched_reason(const std::vector<const config::Profile*>& agents) {
    if (agents.size() < 2) return "one agent";
    const config::Profile& first = *agents.front();
    if (first.run.population_batching == "off") return "run.population_batching = \"off\"";
    if (first.run.search == "halving")
        if (std::string why = trainers::batched_halving_unsupported(first, search_interval(first)); !why.empty())
            return why;
    for (std::size_t i = 0; i < agents.size(); ++i) {
        const std::string why = trainers::batched_population_unsupported(*agents[i], first);
        if (!why.empty()) return fmt::format("agent {}: {}", i, why);
    }
    if (first.run.population_batching == "auto") return trainers::auto_batching_declined(first);
    return "";
}

std::string bench_population(const config::Profile& p, bool force, bool ablate, bool kernel_times) {
    const auto t_start = clock::now();
    const auto n = static_cast<std::size_t>(p.run.population);
    std::vector<Member> members(n);
    std::vector<Member*> training;
    for (std::size_t i = 0; i < n; ++i) {
        members[i].plan.index = static_cast<int>(i);
        members[i].plan.profile = p;
        members[i].plan.profile.run.population = 1;
        members[i].plan.profile.run.seed = p.run.seed + static_cast<std::int64_t>(i);
        training.push_back(&members[i]);
    }
    PopulationSetup setup;
    set_up(setup, training, force);
    if (unbatched_because(training).empty())
        return bench_batched_population(p, setup, training, t_start, ablate, kernel_times);
    if (kernel_times)
        throw UsageError(
            "bench --kernel-times: a population times its ops when it is batched (run.population_batching "
            "and a DQN profile it batches: docs/sweeps.md); else time one agent with run.population = 1");
    std::vector<std::unique_ptr<trainers::Trainer>> trainers_;
    for (std::size_t i = 0; i < n; ++i)
        trainers_.push_back(
            trainers::make_trainer(*setup.devices[i], training[i]->plan.profile,
                                   *setup.markets.at(market_key(training[i]->plan.profile))->device_market));
    BenchPhases phases;
    phases.synchronize = [&] {
        for (auto& d : setup.devices) d->synchronize();
    };
    phases.synchronize();
    BenchFigures b;
    b.first_kernel_s = seconds_since(t_start);
    trainers::Trainer& t0 = *trainers_.front();
    b.phase = bench_phase_iterations(p.run.total_steps, t0.progress_per_iteration());

    // Every phase on the agents' workers (as in training), each agent's work in turn; the
    // untimed warm-up captures the sequences and loads the kernels, as for one agent.
    const std::size_t workers = agent_workers(n, setup.devices.front()->cuda() != nullptr);
    // prepare: each round issues every agent's next iteration (Trainer::prepare_iteration) before
    // f completes any, as training does.
    const auto each_agent = [&](long long times, const std::function<long long(trainers::Trainer&)>& f,
                                bool prepare = false) {
        std::vector<long long> counts(workers, 0);
        on_workers(workers, setup.devices, [&](std::size_t w) {
            for (long long i = 0; i < times; ++i) {
                if (prepare)
                    for (std::size_t a = w; a < n; a += workers) trainers_[a]->prepare_iteration();
                for (std::size_t a = w; a < n; a += workers) counts[w] += f(*trainers_[a]);
            }
        });
        return std::accumulate(counts.begin(), counts.end(), 0LL);
    };
    phases.collect = [&](long long k) {
        return each_agent(
            k, [](trainers::Trainer& tr) { return tr.bench_collect(); }, true);
    };
    phases.update = [&](long long k) { return each_agent(k, [](trainers::Trainer& tr) { return tr.bench_update(); }); };
    phases.iterate = [&](long long k) {
        return each_agent(
            k,
            [](trainers::Trainer& tr) {
                const long long before = tr.env_steps();
                tr.iterate();
                return tr.env_steps() - before;
            },
            true);
    };
    (void)each_agent(1, [](trainers::Trainer& tr) {
        tr.bench_prepare();
        (void)tr.bench_collect();
        (void)tr.bench_update();
        tr.iterate();
        return 0LL;
    });
    phases.synchronize();
    b.t = time_phases(phases, b.phase);
    for (auto& tr : trainers_) (void)tr->read_log(1.0);  // surfaces a diverged guard as exit 5

    // --ablate: each op left out of every agent's captured phase in turn, the phases on the
    // workers as above; microseconds per agent's collection step or update, so what an op costs
    // the population's throughput (its overlap with the other agents' work included).
    json::Value ablation;
    if (ablate && setup.devices.front()->cuda()) {
        // The ops' names: one agent's collection step and update launched op by op.
        cuda::set_kernel_timing(true);
        (void)cuda::collect_kernel_times();
        (void)t0.bench_collect();
        const auto collect_ops = cuda::collect_kernel_times();
        (void)t0.bench_update();
        const auto update_ops = cuda::collect_kernel_times();
        cuda::set_kernel_timing(false);
        ablation = ablation_tables(phases, b.t, collect_ops, update_ops,
                                   static_cast<double>(p.experience.gpu_n_episodes), b.phase);
    }

    b.device = setup.devices.front()->description();
    b.batch_rows = t0.batch_rows();
    for (auto& tr : trainers_) b.dataset_rate += tr->dataset_collection_env_steps_per_s();
    for (auto& d : setup.devices) b.peak += d->peak_bytes();  // every agent's
    json::Object out = bench_json(p, b, n);
    if (!ablation.is_null()) out.emplace_back("ablation", std::move(ablation));  // only with --ablate on CUDA
    return json::serialize(json::Value::object(std::move(out)));
}

}  // namespace fh::run
