/// @file test_op_filter.cpp
/// @brief `bench --ablate`'s filter: which launches it takes, and the stand-in it launches in their
///        place (the host side only: the stand-in here is a counter, not a kernel).
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "device/cuda/kernel_timing.hpp"

namespace {

/// Clears the filter and this test's stand-in whatever happens.
struct FilterReset {
    ~FilterReset() {
        fh::cuda::set_op_filter("");
        fh::cuda::clear_stand_in(this);
    }
};

}  // namespace

TEST_CASE("ablation filter: leaves out or stands in for the named launches, every launch or all but the named",
          "[cuda]") {
    using fh::cuda::FilterMode;
    FilterReset reset;
    std::vector<std::string> stood_in;  // the launches the stand-in replaced, in order
    std::string current;
    fh::cuda::set_stand_in(&reset, [&](cudaStream_t) {
        // The stand-in's own launch passes the filter, even when it takes every launch.
        CHECK_FALSE(fh::cuda::op_filtered("fill_f32_kernel", nullptr));
        stood_in.push_back(current);
    });
    const auto filtered = [&](const std::string& name) {
        current = name;
        return fh::cuda::op_filtered(name, nullptr);
    };

    CHECK_FALSE(fh::cuda::op_names_wanted());
    CHECK_FALSE(filtered("dqn_loss_kernel"));

    const unsigned generation = fh::cuda::op_filter_generation();
    fh::cuda::set_op_filter("dqn_loss_kernel");  // leave out
    CHECK(fh::cuda::op_filter_generation() != generation);
    CHECK(fh::cuda::op_names_wanted());
    CHECK(filtered("dqn_loss_kernel"));
    CHECK_FALSE(filtered("dqn_sample_kernel"));
    CHECK(stood_in.empty());

    fh::cuda::set_op_filter("dqn_loss_kernel", FilterMode::stand_in);
    CHECK(filtered("dqn_loss_kernel"));
    CHECK_FALSE(filtered("linear dW (sgemm) 50x256x256"));
    CHECK(stood_in == std::vector<std::string>{"dqn_loss_kernel"});

    fh::cuda::set_op_filter(fh::cuda::kEveryOp, FilterMode::stand_in);
    CHECK(filtered("dqn_sample_kernel"));
    CHECK(filtered("linear dW (sgemm) 50x256x256"));
    CHECK(stood_in == std::vector<std::string>{"dqn_loss_kernel", "dqn_sample_kernel", "linear dW (sgemm) 50x256x256"});

    fh::cuda::set_op_filter("dqn_loss_kernel", FilterMode::alone);  // every other launch stood in for
    CHECK_FALSE(filtered("dqn_loss_kernel"));
    CHECK(filtered("dqn_act_kernel"));
    CHECK(stood_in.back() == "dqn_act_kernel");
    stood_in.pop_back();

    fh::cuda::set_op_filter(fh::cuda::kEveryOp);  // every launch left out: no stand-in
    CHECK(filtered("dqn_finish_kernel"));
    CHECK(stood_in.size() == 3);

    fh::cuda::set_op_filter("");
    CHECK_FALSE(fh::cuda::op_names_wanted());
    CHECK_FALSE(filtered("dqn_finish_kernel"));

    // Only the owner clears the stand-in; without one, standing in is an error, not a silent skip.
    int other = 0;
    fh::cuda::clear_stand_in(&other);
    fh::cuda::set_op_filter("x", FilterMode::stand_in);
    CHECK(filtered("x"));
    fh::cuda::clear_stand_in(&reset);
    CHECK_THROWS_AS(filtered("x"), std::logic_error);
}
