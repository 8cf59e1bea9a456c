/// @file test_statistics.cpp
/// @brief The normalisation statistics' moments (math/statistics.h): the fixed chunked order
///        on the host against plain sums in long double, the hook load_market gives a run, and
///        [gpu] the device's moments (ops::column_moments, run::device_column_moments) equal the
///        host's bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "data/features.hpp"
#include "data/load.hpp"
#include "data/splits.hpp"
#include "data/synthetic_market.hpp"
#include "device/cpu_device.hpp"
#include "abi/data_statistics.h"
#include "run/session.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"

using namespace fh::data;

namespace {

/// A (rows, D) matrix with a large common offset per column (cancellation makes the order show)
/// and a row subset with gaps: every row but multiples of 7.
struct Matrix {
    std::vector<float> values;
    std::vector<long long> rows;
    int D;
};
Matrix matrix(long long n_rows, int D, std::uint64_t seed) {
    Matrix m{fh::test::random_floats(static_cast<std::size_t>(n_rows) * D, seed, -1.f, 1.f), {}, D};
    for (long long r = 0; r < n_rows; ++r)
        for (int k = 0; k < D; ++k)
            m.values[static_cast<std::size_t>(r * D + k)] += 1000.0f * static_cast<float>(k % 5);
    for (long long r = 0; r < n_rows; ++r)
        if (r % 7 != 0) m.rows.push_back(r);
    return m;
}

}  // namespace

TEST_CASE("column moments: the chunked order is the plain sum up to a chunk, close to exact beyond", "[data]") {
    for (long long n_rows : {1000LL, 30000LL}) {  // one chunk; eight chunks
        const auto m = matrix(n_rows, 5, 11);
        std::vector<double> mean, m2;
        host_column_moments(m.values, m.D, m.rows, mean, m2);
        for (int k = 0; k < m.D; ++k) {
            double plain = 0;
            long double exact = 0;
            for (auto r : m.rows) {
                plain += m.values[static_cast<std::size_t>(r * m.D + k)];
                exact += m.values[static_cast<std::size_t>(r * m.D + k)];
            }
            const auto n = static_cast<double>(m.rows.size());
            if (m.rows.size() <= static_cast<std::size_t>(fh::statistics::kChunkRows)) CHECK(mean[k] == plain / n);
            CHECK(mean[k] == Approx(static_cast<double>(exact / n)).epsilon(1e-13));
            long double sq = 0;
            for (auto r : m.rows) {
                const long double d = m.values[static_cast<std::size_t>(r * m.D + k)] - exact / n;
                sq += d * d;
            }
            CHECK(m2[k] == Approx(static_cast<double>(sq)).epsilon(1e-9));
        }
        // The op's CPU twin is the same computation.
        fh::ops::CpuDevice cpu;
        auto v = cpu.from_host<float>(m.values);
        auto r = cpu.from_host<long long>(m.rows);
        auto md = cpu.alloc<double>(5), m2d = cpu.alloc<double>(5);
        auto scratch = cpu.alloc<double>(fh::ops::column_moments_scratch_size(m.rows.size(), m.D));
        fh::ops::run(cpu, fh::ops::ColumnMoments{md.view(), m2d.view(), scratch.view(), v.cview(), r.cview(), m.D});
        CHECK(cpu.to_host(md.cview()) == mean);
        CHECK(cpu.to_host(m2d.cview()) == m2);
    }
}

TEST_CASE("load_market computes the statistics through the options' column moments", "[data]") {
    DataOptions o;
    o.synthetic_bars = 3000;
    o.seed = 5;
    o.use_cache = false;
    const auto host = load_market(o);
    int calls = 0;
    o.column_moments = [&](const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                           std::vector<double>& mean, std::vector<double>& m2) -> std::string {
        ++calls;
        CHECK(rows.front() >= static_cast<long long>(host.warmup_bars));  // past the warm-up
        CHECK(rows.back() < static_cast<long long>(host.train.end));      // the training split only
        host_column_moments(values, dim, rows, mean, m2);
        for (auto& x : mean) x *= 2.0;  // visibly its result (a power of two: rounds alike)
        return "device";                // as a GPU run's hook says
    };
    const auto hooked = load_market(o);
    CHECK(calls == 1);
    CHECK(host.norm_computed_on == "host");
    CHECK(hooked.norm_computed_on == "device");
    CHECK(hooked.norm_rows == static_cast<std::size_t>(host.train.end - host.warmup_bars));
    CHECK(describe(hooked).find("computed on the device") != std::string::npos);
    CHECK(describe(host).find("computed on the host") != std::string::npos);
    for (std::size_t k = 0; k < host.norm.mean.size(); ++k) CHECK(hooked.norm.mean[k] == 2.0f * host.norm.mean[k]);
}

TEST_CASE("column moments on the device equal the host's bit for bit", "[gpu][data]") {
    auto& gpu = fh::test::gpu_ops();
    for (auto [n_rows, D] : std::vector<std::pair<long long, int>>{{5000, 42}, {70001, 42}, {9000, 300}, {3, 1}}) {
        INFO(n_rows << " rows x " << D);
        const auto m = matrix(n_rows, D, 17 + static_cast<std::uint64_t>(D));
        std::vector<double> mean_h, m2_h, mean_d, m2_d;
        host_column_moments(m.values, m.D, m.rows, mean_h, m2_h);
        fh::run::device_column_moments(gpu)(m.values, m.D, m.rows, mean_d, m2_d);
        CHECK(mean_d == mean_h);
        CHECK(m2_d == m2_h);
    }
    // A synthetic market's training statistics through the device hook.
    DataOptions o;
    o.synthetic_bars = 60000;
    o.seed = 9;
    o.use_cache = false;
    const auto host = load_market(o);
    o.column_moments = fh::run::device_column_moments(gpu);
    const auto device = load_market(o);
    CHECK(device.norm.mean == host.norm.mean);
    CHECK(device.norm.stddev == host.norm.stddev);
    CHECK(device.features == host.features);
    CHECK(device.norm_computed_on == "device");
}
