/// @file session.cpp
#include "run/session.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "ops/make_device.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

std::unique_ptr<ops::Device> make_device(const config::Profile& p) {
    // Keys accepted by the schema that this version does not act on yet: said once, not ignored silently.
    if (p.gpu.cuda_graphs)
        log::info("gpu.cuda_graphs: CUDA Graph capture is not implemented yet; kernels are launched directly");
    if (p.gpu.profile != "auto")
        log::warn("gpu.profile = \"{}\": named device classes are not implemented yet; the device is read at start",
                  p.gpu.profile);
    auto ops = ops::make_device(ops::parse_device_spec(p.run.device));
    ops->set_tf32(p.gpu.tf32);
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
    ops = make_device(p);
    market = data::load_market(trainers::data_options(p));
    check_device_memory(*ops, p, market.bars.size());
    device_market = std::make_unique<env::DeviceMarket>(*ops, market);
}

}  // namespace fh::run
