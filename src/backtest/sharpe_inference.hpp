/// @file sharpe_inference.hpp
/// @brief The probabilistic and deflated Sharpe ratios (Bailey & López de Prado 2012, 2014) of
///        per-bar (non-annualised) Sharpe ratios; formulas in docs/metrics.md "Probabilistic and
///        deflated Sharpe ratios". Host-only.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace fh::backtest {

/// The Euler-Mascheroni constant.
inline constexpr double kEulerGamma = 0.5772156649015329;

/// The standard normal CDF Phi(x) and its inverse (p in (0, 1); near double precision).
double normal_cdf(double x);
double normal_quantile(double p);

/// The moments the PSR needs of a series of n returns: the per-bar Sharpe ratio mean / sd (sample
/// sd, divisor n - 1), the skewness m3 / m2^1.5 and the kurtosis m4 / m2^2 (not excess: 3 for a
/// normal) with the population central moments m_k = mean((r - mean)^k). Sharpe 0, skewness 0 and
/// kurtosis 3 when sd = 0 or n < 2.
struct SharpeMoments {
    std::size_t n = 0;
    double sharpe = 0, skewness = 0, kurtosis = 3;
};
SharpeMoments sharpe_moments(const std::vector<double>& returns);

/// PSR(benchmark) = Phi((SR - SR*) sqrt(n - 1) / sqrt(1 - skew SR + (kurt - 1) / 4 SR^2)), all per bar.
/// Empty when n < 2 or the denominator's radicand is not positive.
std::optional<double> probabilistic_sharpe(const SharpeMoments& m, double benchmark);

/// The expected maximum of n_trials independent standard normals (the paper's approximation):
/// (1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e)). 0 for N = 1.
double expected_maximum_normal(std::size_t n_trials);

/// The deflated Sharpe ratio: PSR(SR0) of the best trial, SR0 = sqrt(variance) * expected maximum
/// of n_trials standard normals, `variance` the variance of the trials' per-bar Sharpe ratios.
struct Deflated {
    double sr0 = 0;             ///< the Sharpe ratio the best of n_trials tries of noise reaches
    std::optional<double> dsr;  ///< PSR(sr0) of the best trial
};
Deflated deflated_sharpe(const SharpeMoments& best, std::size_t n_trials, double variance);

}  // namespace fh::backtest
