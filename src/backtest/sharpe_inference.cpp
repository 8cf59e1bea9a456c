/// @file sharpe_inference.cpp
#include "backtest/sharpe_inference.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace fh::backtest {

double normal_cdf(double x) {
    return 0.5 * std::erfc(-x / std::numbers::sqrt2);
}

double normal_quantile(double p) {
    if (!(p > 0 && p < 1)) throw std::invalid_argument("normal_quantile: p must lie in (0, 1)");
    // The upper half by symmetry: 1 - p is exact there (Sterbenz), and the refinement below is
    // accurate in the lower tail, where Phi(x) - p does not cancel.
    if (p > 0.5) return -normal_quantile(1 - p);
    // Acklam's rational approximation (relative error below 1.2e-9), then one Halley step on
    // Phi(x) - p, which brings it to about double precision.
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    const double low = 0.02425;
    double x;
    if (p < low) {
        const double q = std::sqrt(-2 * std::log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else {  // the central region up to 0.5 (Acklam's upper tail is never reached)
        const double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    const double e = normal_cdf(x) - p;
    const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

SharpeMoments sharpe_moments(const std::vector<double>& r) {
    SharpeMoments m;
    m.n = r.size();
    if (r.size() < 2) return m;
    const auto n = static_cast<double>(r.size());
    double mean = 0;
    for (double x : r) mean += x;
    mean /= n;
    double m2 = 0, m3 = 0, m4 = 0;
    for (double x : r) {
        const double d = x - mean, d2 = d * d;
        m2 += d2;
        m3 += d2 * d;
        m4 += d2 * d2;
    }
    const double sample_var = m2 / (n - 1);
    m2 /= n;
    m3 /= n;
    m4 /= n;
    if (!(m2 > 0)) return m;
    m.sharpe = mean / std::sqrt(sample_var);
    m.skewness = m3 / std::pow(m2, 1.5);
    m.kurtosis = m4 / (m2 * m2);
    return m;
}

std::optional<double> probabilistic_sharpe(const SharpeMoments& m, double benchmark) {
    if (m.n < 2) return std::nullopt;
    const double radicand = 1 - m.skewness * m.sharpe + (m.kurtosis - 1) / 4 * m.sharpe * m.sharpe;
    if (!(radicand > 0) || !std::isfinite(radicand)) return std::nullopt;
    return normal_cdf((m.sharpe - benchmark) * std::sqrt(static_cast<double>(m.n - 1)) / std::sqrt(radicand));
}

double expected_maximum_normal(std::size_t n_trials) {
    if (n_trials < 2) return 0.0;
    const auto n = static_cast<double>(n_trials);
    return (1 - kEulerGamma) * normal_quantile(1 - 1 / n) +
           kEulerGamma * normal_quantile(1 - 1 / (n * std::numbers::e));
}

Deflated deflated_sharpe(const SharpeMoments& best, std::size_t n_trials, double variance) {
    Deflated d;
    d.sr0 = std::sqrt(std::max(0.0, variance)) * expected_maximum_normal(n_trials);
    d.dsr = probabilistic_sharpe(best, d.sr0);
    return d;
}

}  // namespace fh::backtest
