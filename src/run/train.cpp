/// @file train.cpp
/// @brief The single training run: the session (device, data), the trainer and the run directory,
///        then one AgentRun (src/run/agent_run.hpp) through its loop.
#include "run/run.hpp"

#include <chrono>
#include <ctime>
#include <optional>

#include "io/run_directory.hpp"
#include "run/agent_run.hpp"
#include "run/session.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/fault.hpp"
#include "util/signals.hpp"

namespace fh::run {

using clock = std::chrono::steady_clock;

std::string run_name(const config::Profile& p) {
    if (!p.run.name.empty()) return p.run.name;
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return p.run.trainer + "-" + stamp;
}

std::string train(const config::Profile& p, const std::string& resume_dir, const std::vector<std::string>& overrides,
                  bool force) {
    const auto t0 = clock::now();
    // --resume takes the run directory's lock first: a second resume of a running run stops here.
    std::optional<io::RunDirectory> locked;
    if (!resume_dir.empty()) locked.emplace(io::RunDirectory::open(resume_dir));
    Session session(p, force);
    util::fault_point("session");
    auto trainer = trainers::make_trainer(*session.ops, p, *session.device_market);
    util::fault_point("trainer");
    auto dir = locked ? std::move(*locked) : io::RunDirectory::create(p.run.output_dir, run_name(p));
    util::fault_point("run-directory");
    AgentOptions options;
    options.overrides = overrides;
    options.resume_dir = resume_dir;
    AgentRun run(p, *session.ops, session.market, *session.device_market, std::move(trainer), std::move(dir),
                 !resume_dir.empty(), std::move(options), t0);
    signals::install_interrupt_handlers();
    run.begin();
    while (run.step()) {
    }
    if (run.status() == "diverged") throw DivergedError(run.error());
    run.finish();
    if (run.status() == "interrupted") throw InterruptedError(run.error());
    return run.path();
}

}  // namespace fh::run
