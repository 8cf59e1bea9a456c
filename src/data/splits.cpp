/// @file splits.cpp
/// @brief Time splits, bars_per_year inference and training-split normalisation.
#include "data/splits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "math/statistics.h"
#include "util/errors.hpp"

namespace fh::data {

void make_splits(MarketData& md, const SplitFractions& f) {
    const double sum = f.train + f.val + f.test;
    if (!(f.train > 0) || !(f.val >= 0) || !(f.test >= 0) || !(sum <= 1.0 + 1e-9))
        throw UsageError(
            fmt::format("data.train_fraction/val_fraction/test_fraction = {}/{}/{}: expected train > 0, val >= 0, "
                        "test >= 0 and a sum <= 1",
                        f.train, f.val, f.test));
    const std::size_t n = md.bars.size();
    const auto at = [&](double frac) {
        return std::min(n, static_cast<std::size_t>(std::floor(static_cast<double>(n) * frac + 1e-9)));
    };
    const std::size_t a = at(f.train), b = at(f.train + f.val);
    const std::size_t c = std::abs(sum - 1.0) <= 1e-9 ? n : at(sum);
    md.train = {0, a};
    md.val = {a, b};
    md.test = {b, std::max(b, c)};
}

std::int64_t median_spacing(const BarSeries& bars) {
    std::vector<std::int64_t> d;
    d.reserve(bars.size());
    for (std::size_t i = 1; i < bars.size(); ++i)
        if (bars.segment_begin(i) != i) d.push_back(bars.time[i] - bars.time[i - 1]);
    if (d.empty()) return 0;
    auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
    std::nth_element(d.begin(), mid, d.end());
    return *mid;
}

double infer_bars_per_year(const BarSeries& bars) {
    constexpr double kYear = 365.2425 * 86400.0;
    const std::int64_t spacing = median_spacing(bars);
    if (spacing <= 0) return 0;
    double covered = 0;  // seconds covered by the segments, each counted as (last - first + spacing)
    for (std::size_t k = 0; k < bars.segment_starts.size(); ++k) {
        const std::size_t s = bars.segment_starts[k];
        const std::size_t e = k + 1 < bars.segment_starts.size() ? bars.segment_starts[k + 1] : bars.size();
        covered += static_cast<double>(bars.time[e - 1] - bars.time[s] + spacing);
    }
    if (covered >= 90.0 * 86400.0) return static_cast<double>(bars.size()) * kYear / covered;
    // Short data: classify by the median spacing.
    const double day = 86400.0;
    if (spacing >= 20 * 3600) {
        if (spacing < 4 * day) return 252.0;  // daily bars, trading days only
        if (spacing < 20 * day) return 52.0;  // weekly
        return kYear / static_cast<double>(spacing);
    }
    // Intraday: 252 trading days times the median number of bars per UTC calendar day.
    std::vector<std::size_t> per_day;
    std::int64_t cur = INT64_MIN;
    for (std::size_t i = 0; i < bars.size(); ++i) {
        const std::int64_t dday = bars.time[i] >= 0 ? bars.time[i] / 86400 : -((-bars.time[i] + 86399) / 86400);
        if (dday != cur) per_day.push_back(0), cur = dday;
        ++per_day.back();
    }
    auto mid = per_day.begin() + static_cast<std::ptrdiff_t>(per_day.size() / 2);
    std::nth_element(per_day.begin(), mid, per_day.end());
    return 252.0 * static_cast<double>(*mid);
}

std::string host_column_moments(const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                                std::vector<double>& mean, std::vector<double>& m2) {
    const auto D = static_cast<std::size_t>(dim);
    const auto n = static_cast<long long>(rows.size());
    mean.assign(D, 0.0);
    m2.assign(D, 0.0);
    std::vector<double> scratch(static_cast<std::size_t>(statistics::chunk_count(n)) * D);
    statistics::column_moments_serial(mean.data(), m2.data(), scratch.data(), values.data(), rows.data(), n, dim);
    return "host";
}

NormalizationStats training_stats(const RawFeatures& raw, const BarSeries& bars, const SplitRange& train,
                                  std::size_t warmup, float clip, const ColumnMoments& moments,
                                  StatisticsSource* where) {
    const auto D = static_cast<std::size_t>(raw.dim);
    std::vector<long long> rows;
    for (std::size_t t = train.begin; t < train.end; ++t)
        if (t >= bars.segment_begin(t) + warmup) rows.push_back(static_cast<long long>(t));
    if (rows.empty())
        for (std::size_t t = train.begin; t < train.end; ++t) rows.push_back(static_cast<long long>(t));
    std::vector<double> mean(D, 0.0), m2(D, 0.0);
    std::string computed_on = "host";
    if (!rows.empty())
        computed_on = (moments ? moments : ColumnMoments(host_column_moments))(raw.values, raw.dim, rows, mean, m2);
    if (where) *where = StatisticsSource{rows.size(), computed_on};
    const double m = std::max<double>(1.0, static_cast<double>(rows.size()));
    NormalizationStats st{.mean = std::vector<float>(D), .stddev = std::vector<float>(D), .clip = clip};
    for (std::size_t k = 0; k < D; ++k) {
        const double sd = std::sqrt(m2[k] / m);
        st.mean[k] = static_cast<float>(mean[k]);
        st.stddev[k] = sd < 1e-8 ? 1.0f : static_cast<float>(sd);
    }
    return st;
}

void normalize_in_place(std::vector<float>& values, const NormalizationStats& st) {
    const std::size_t D = st.mean.size();
    for (std::size_t row = 0; row + D <= values.size(); row += D)
        for (std::size_t k = 0; k < D; ++k)
            values[row + k] = std::clamp((values[row + k] - st.mean[k]) / st.stddev[k], -st.clip, st.clip);
}

std::vector<float> normalize(const RawFeatures& raw, const NormalizationStats& st) {
    std::vector<float> out = raw.values;
    normalize_in_place(out, st);
    return out;
}

}  // namespace fh::data
