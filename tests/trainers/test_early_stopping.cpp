/// @file test_early_stopping.cpp
/// @brief Early stopping: stops after `patience` evaluations without improvement, not while
///        improving, never before min_steps; keeps the best.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "trainers/early_stopping.hpp"

using fh::trainers::EarlyStopping;

TEST_CASE("early stopping stops after patience evaluations without improvement", "[trainers][early_stopping]") {
    EarlyStopping es(3, 0.0, 0);
    CHECK(es.observe(100, 1.0).improved);
    CHECK_FALSE(es.observe(200, 0.9).stop);
    CHECK_FALSE(es.observe(300, 1.0).stop);  // equal is not an improvement
    const auto d = es.observe(400, 0.5);
    CHECK(d.stop);
    CHECK_FALSE(d.improved);
    CHECK(*es.best() == 1.0);
    CHECK(es.best_step() == 100);
}

TEST_CASE("early stopping never stops while improving, and min_delta decides what counts",
          "[trainers][early_stopping]") {
    EarlyStopping es(2, 0.1, 0);
    for (int i = 0; i < 50; ++i) {
        const auto d = es.observe(i, 0.2 * i);
        CHECK(d.improved);
        CHECK_FALSE(d.stop);
    }
    EarlyStopping small(2, 0.1, 0);
    CHECK(small.observe(1, 1.0).improved);
    CHECK_FALSE(small.observe(2, 1.05).improved);  // +0.05 <= min_delta
    CHECK(small.observe(3, 1.06).stop);
    CHECK(*small.best() == 1.0);
}

TEST_CASE("early stopping never stops before min_steps", "[trainers][early_stopping]") {
    EarlyStopping es(1, 0.0, 1000);
    es.observe(100, 5.0);
    CHECK_FALSE(es.observe(200, 1.0).stop);
    CHECK_FALSE(es.observe(900, 1.0).stop);
    CHECK(es.observe(1000, 1.0).stop);
}

TEST_CASE("early stopping: patience 0 never stops; NaN never improves", "[trainers][early_stopping]") {
    EarlyStopping es(0, 0.0, 0);
    es.observe(1, 1.0);
    for (int i = 2; i < 100; ++i) CHECK_FALSE(es.observe(i, 0.0).stop);
    EarlyStopping n(2, 0.0, 0);
    CHECK_FALSE(n.observe(1, std::nan("")).improved);
    CHECK_FALSE(n.best().has_value());
    CHECK(n.observe(2, -3.0).improved);
}

TEST_CASE("early stopping: +infinity (val_sortino without downside) beats any number, a later one ties",
          "[trainers][early_stopping]") {
    const double inf = std::numeric_limits<double>::infinity();
    EarlyStopping es(2, 0.0, 0);
    CHECK(es.observe(1, 3.0).improved);
    CHECK(es.observe(2, inf).improved);        // a gain with no losing bar: the best there is
    CHECK_FALSE(es.observe(3, inf).improved);  // a tie keeps the first
    CHECK(es.best_step() == 2);
    CHECK(es.observe(4, 1e300).stop);  // two evaluations without improvement
    CHECK(*es.best() == inf);
}
