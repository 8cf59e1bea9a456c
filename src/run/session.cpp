/// @file session.cpp
#include "run/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <stdexcept>

#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "device/make_device.hpp"
#include "abi/data_statistics.h"
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
    ops->set_precision(profile_precision(p));
    ops->set_graphs(p.gpu.cuda_graphs);
    log::info("device: {}, precision {}", ops->description(), p.gpu.precision);
    return ops;
}

ops::Precision profile_precision(const config::Profile& p) {
    const auto precision = ops::parse_precision(p.gpu.precision);
    if (!precision) throw std::logic_error("gpu.precision = \"" + p.gpu.precision + "\" passed the schema");
    return *precision;
}

data::ColumnMoments device_column_moments(ops::Device& device) {
    return [&device](const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                     std::vector<double>& mean, std::vector<double>& m2) -> std::string {
        const auto D = static_cast<std::size_t>(dim);
        auto v = device.from_host<float>(values);
        auto r = device.from_host<long long>(rows);
        auto mean_d = device.alloc<double>(D), m2_d = device.alloc<double>(D);
        auto scratch = device.alloc<double>(ops::column_moments_scratch_size(rows.size(), dim));
        ops::run(device, ops::ColumnMoments{mean_d.view(), m2_d.view(), scratch.view(), v.cview(), r.cview(), dim});
        mean = device.to_host(mean_d.cview());
        m2 = device.to_host(m2_d.cview());
        return "device";
    };
}

void check_device_memory(const ops::Device& device, const config::Profile& p,
                         const std::vector<config::MemoryItem>& items) {
    const auto memory = device.memory();
    if (!memory) return;  // the CPU backend's memory is host memory: check_run compared it
    const auto need = config::total_bytes(items);
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(memory->free_bytes) * p.gpu.memory_fraction);
    log::info("device memory: {} estimated, {} available (gpu.memory_fraction {} of {} free)",
              config::format_bytes(need), config::format_bytes(budget), p.gpu.memory_fraction,
              config::format_bytes(memory->free_bytes));
    config::require_memory(
        items, budget, "device memory",
        fmt::format("gpu.memory_fraction {} of the free memory of {}", p.gpu.memory_fraction, memory->name));
}

Session::Session(const config::Profile& p, bool force) {
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    // The device (CUDA context, kernel modules, cuBLAS) starts on another thread while the data
    // is checked and loaded: the two are independent and together are most of the time to the
    // first kernel.
    const auto t0 = clock::now();
    std::unique_ptr<ops::Device> started;  // set by the device's thread; read after device.wait()
    auto device = std::async(std::launch::async, [&p, &since, t0, &started] {
        started = make_device(p);
        return since(t0);
    });
    // Large data: the normalisation statistics on the GPU once it is up (the same bits as the
    // host's; the host's when there is no GPU or the upload fails).
    auto options = trainers::data_options(p);
    options.column_moments = [&](const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                                 std::vector<double>& mean, std::vector<double>& m2) -> std::string {
        const auto n_values = static_cast<std::uint64_t>(rows.size()) * static_cast<std::uint64_t>(dim);
        if (n_values >= kDeviceStatisticsMinValues) {
            device.wait();
            if (started && started->cuda()) {
                try {
                    started->make_current();
                    const auto t = clock::now();
                    const auto where = device_column_moments(*started)(values, dim, rows, mean, m2);
                    log::info("data: normalisation statistics of {} rows x {} features on the device in {:.3f} s",
                              rows.size(), dim, since(t));
                    return where;
                } catch (const std::exception& e) {
                    log::warn("data: normalisation statistics on the device failed ({}); computing them on the host",
                              e.what());
                }
            }
        }
        return data::host_column_moments(values, dim, rows, mean, m2);
    };
    // Everything `check` checks, before anything is allocated (src/trainers/run_checks.hpp).
    trainers::RunCheckOptions o;
    o.force = force;
    try {
        trainers::check_data_size(p, o);
        market = data::load_market(options);
    } catch (...) {
        device.wait();  // the device's thread finishes before the error leaves
        throw;
    }
    const double data_s = since(t0);
    const double device_s = device.get();  // rethrows the device's start-up error
    ops = std::move(started);
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
