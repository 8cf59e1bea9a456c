/// @file test_signals.cpp
/// @brief The first SIGINT/SIGTERM only sets the flag. (The second exits the process with
///        130, which is not testable in-process.)
#include <catch2/catch.hpp>

#include <csignal>

#include "util/signals.hpp"

using namespace fh::signals;

TEST_CASE("signals: one SIGINT or SIGTERM sets the interrupt flag", "[io][signals]") {
    install_interrupt_handlers();
    install_interrupt_handlers();  // idempotent
    reset_interrupt_for_tests();
    CHECK_FALSE(interrupt_requested());
    CHECK(interrupt_signal() == 0);

    REQUIRE(std::raise(SIGINT) == 0);
    CHECK(interrupt_requested());
    CHECK(interrupt_signal() == SIGINT);

    reset_interrupt_for_tests();
    CHECK_FALSE(interrupt_requested());
    REQUIRE(std::raise(SIGTERM) == 0);
    CHECK(interrupt_requested());
    CHECK(interrupt_signal() == SIGTERM);

    reset_interrupt_for_tests();
    uninstall_interrupt_handlers();
    CHECK_FALSE(interrupt_requested());
}
