/// @file session.hpp
/// @brief What every run (train, eval, bench) sets up first: the device, the market data on the
///        host and on the device, after checking that the run fits in the device's memory.
#pragma once

#include <cstdint>
#include <memory>

#include "config/memory_estimate.hpp"
#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "data/splits.hpp"
#include "env/vec_env.hpp"
#include "device/device.hpp"

namespace fh::run {

/// The device the profile names (run.device, gpu.precision), with its description logged.
std::unique_ptr<ops::Device> make_device(const config::Profile& profile);
/// gpu.precision as the device's setting (the schema allows only its names).
ops::Precision profile_precision(const config::Profile& profile);

/// Training rows x features from which a run with a GPU computes the normalisation statistics on
/// the device (device_column_moments) instead of the host: below it the upload costs more than
/// the two passes on one core save. The results are the same bits either way.
inline constexpr std::uint64_t kDeviceStatisticsMinValues = 1ull << 24;

/// data::ColumnMoments on `device` (ops::column_moments): uploads the features and the rows,
/// computes, downloads the moments; bit for bit data::host_column_moments.
data::ColumnMoments device_column_moments(ops::Device& device);

/// A run that cannot fit stops before allocating (exit 4), naming the biggest consumers of the
/// estimate (src/config/memory_estimate.hpp). A no-op on a device without a memory budget (the
/// CPU backend, whose memory check_run compares with the host's).
void check_device_memory(const ops::Device& device, const config::Profile& profile,
                         const std::vector<config::MemoryItem>& items);

/// The device, the data and the market on the device. Members in destruction order: the device
/// market before its device.
struct Session {
    std::unique_ptr<ops::Device> ops;
    data::MarketData market;
    std::unique_ptr<env::DeviceMarket> device_market;

    /// `force`: run although the instrument does not fit the prices (src/trainers/run_checks.hpp).
    Session(const config::Profile& profile, bool force);
};

}  // namespace fh::run
