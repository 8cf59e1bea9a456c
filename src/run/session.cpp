/// @file session.cpp
#include "run/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "ops/make_device.hpp"
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

void check_device_memory(const ops::Device& device, const config::Profile& p, std::size_t bars) {
    const auto memory = device.memory();
    if (!memory) return;
    const auto items = config::estimate_device_memory(p, bars);
    const auto need = config::total_bytes(items);
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(memory->free_bytes) * p.gpu.memory_fraction);
    log::info("device memory: {} estimated, {} available (gpu.memory_fraction {} of {} free)", config::format_bytes(need),
              config::format_bytes(budget), p.gpu.memory_fraction, config::format_bytes(memory->free_bytes));
    if (need <= budget) return;
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, items.size()); ++i)
        top += fmt::format("\n  {:>10}  {}{}", config::format_bytes(items[i].bytes), items[i].consumer,
                           items[i].key.empty() ? "" : fmt::format(" (change {})", items[i].key));
    throw DeviceError(fmt::format("the run needs about {} of device memory but {} is available on {}; the biggest "
                                  "consumers:{}",
                                  config::format_bytes(need), config::format_bytes(budget), memory->name, top));
}

Session::Session(const config::Profile& p) {
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    // The device (CUDA context, kernel modules, cuBLAS) starts on another thread while the data
    // loads: the two are independent and together are most of the time to the first kernel.
    const auto t0 = clock::now();
    auto device = std::async(std::launch::async, [&p, &since, t0] {
        auto d = make_device(p);
        return std::pair{std::move(d), since(t0)};
    });
    try {
        market = data::load_market(trainers::data_options(p));
    } catch (...) {
        device.wait();  // the device's thread finishes before the error leaves
        throw;
    }
    const double data_s = since(t0);
    auto [d, device_s] = device.get();
    ops = std::move(d);
    ops->make_current();  // it was created on the other thread
    check_device_memory(*ops, p, market.bars.size());
    const auto t1 = clock::now();
    device_market = std::make_unique<env::DeviceMarket>(*ops, market);
    log::debug("start-up: device {:.3f} s and data {:.3f} s (in parallel), market upload {:.3f} s", device_s, data_s,
               since(t1));
}

}  // namespace fh::run
