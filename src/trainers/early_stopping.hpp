/// @file early_stopping.hpp
/// @brief Early stopping on a validation metric: the best value so far, with
///        `patience` evaluations without an improvement of more than `min_delta` ending the run,
///        never before `min_steps`. Higher is better (val_sharpe, val_return, val_sortino), or
///        lower (val_loss: the supervised forecaster's validation loss).
#pragma once

#include <cstdint>
#include <optional>

namespace fh::trainers {

class EarlyStopping {
public:
    /// patience 0 disables stopping (the best is still tracked).
    EarlyStopping(std::int64_t patience, double min_delta, std::int64_t min_steps, bool lower_is_better = false)
        : patience_(patience), min_delta_(min_delta), min_steps_(min_steps), lower_is_better_(lower_is_better) {}

    struct Decision {
        bool improved = false;  ///< this evaluation is the new best: keep its weights
        bool stop = false;      ///< end the run now (status early_stopped)
    };

    /// Records the metric of the evaluation at `step` (env steps). A NaN never improves.
    Decision observe(std::int64_t step, double metric) {
        Decision d;
        const bool is_number = metric == metric;
        const bool better = lower_is_better_ ? metric < best_value_ - min_delta_ : metric > best_value_ + min_delta_;
        if (is_number && (!has_best_ || better)) {
            has_best_ = true;
            best_value_ = metric;
            best_step_ = step;
            stale_ = 0;
            d.improved = true;
            return d;
        }
        ++stale_;
        d.stop = patience_ > 0 && stale_ >= patience_ && step >= min_steps_;
        return d;
    }

    std::optional<double> best() const noexcept {
        return has_best_ ? std::optional<double>(best_value_) : std::nullopt;
    }
    std::int64_t best_step() const noexcept { return best_step_; }
    std::int64_t evaluations_without_improvement() const noexcept { return stale_; }
    /// Restores the state from a checkpoint.
    void restore(std::optional<double> best, std::int64_t best_step, std::int64_t stale) {
        has_best_ = best.has_value();
        best_value_ = best.value_or(0.0);
        best_step_ = best_step;
        stale_ = stale;
    }

private:
    std::int64_t patience_;
    double min_delta_;
    std::int64_t min_steps_;
    bool lower_is_better_;
    bool has_best_ = false;
    double best_value_ = 0.0;
    std::int64_t best_step_ = -1;
    std::int64_t stale_ = 0;
};

}  // namespace fh::trainers
