/// @file session.cpp
#include "run/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "ops/make_device.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

std::unique_ptr<ops::Device> make_device(const config::Profile& p) {
    // Keys accepted by the schema that this version does not act on yet: said once, not ignored silently.
    if (p.gpu.profile != "auto")
        log::warn("gpu.profile = \"{}\": named device classes are not implemented yet; the device is read at start",
                  p.gpu.profile);
    auto ops = ops::make_device(ops::parse_device_spec(p.run.device));
    ops->set_tf32(p.gpu.tf32);
    ops->set_graphs(p.gpu.cuda_graphs);
    log::info("device: {}", ops->description());
    return ops;
}

void check_device_memory(const ops::Device& device, const config::Profile& p,
                         const std::vector<config::MemoryItem>& items) {
    const auto memory = device.memory();
    if (!memory) return;  // the CPU backend's memory is host memory: check_run compared it
    const auto need = config::total_bytes(items);
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(memory->free_bytes) * p.gpu.memory_fraction);
    log::info("device memory: {} estimated, {} available (gpu.memory_fraction {} of {} free)", config::format_bytes(need),
              config::format_bytes(budget), p.gpu.memory_fraction, config::format_bytes(memory->free_bytes));
    config::require_memory(items, budget, "device memory",
                           fmt::format("gpu.memory_fraction {} of the free memory of {}", p.gpu.memory_fraction,
                                       memory->name));
}

Session::Session(const config::Profile& p, bool force) {
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    // The device (CUDA context, kernel modules, cuBLAS) starts on another thread while the data
    // is checked and loaded: the two are independent and together are most of the time to the
    // first kernel.
    const auto t0 = clock::now();
    auto device = std::async(std::launch::async, [&p, &since, t0] {
        auto d = make_device(p);
        return std::pair{std::move(d), since(t0)};
    });
    // Everything `check` checks, before anything is allocated (src/trainers/run_checks.hpp).
    trainers::RunCheckOptions o;
    o.force = force;
    try {
        trainers::check_data_size(p, o);
        market = data::load_market(trainers::data_options(p));
    } catch (...) {
        device.wait();  // the device's thread finishes before the error leaves
        throw;
    }
    const double data_s = since(t0);
    auto [d, device_s] = device.get();
    ops = std::move(d);
    ops->make_current();  // it was created on the other thread
    o.host_backend = ops->cuda() == nullptr;
    const trainers::RunSizes sizes = trainers::check_run(p, market, o);
    check_device_memory(*ops, p, sizes.device);
    const auto t1 = clock::now();
    device_market = std::make_unique<env::DeviceMarket>(*ops, market);
    log::debug("start-up: device {:.3f} s and data {:.3f} s (in parallel), market upload {:.3f} s", device_s, data_s,
               since(t1));
}

}  // namespace fh::run
