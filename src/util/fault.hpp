/// @file fault.hpp
/// @brief Fault injection for the tests: a named point of set-up or training throws, as a full
///        disk or a bad file would there, so that every error path is exercised (unwinding
///        devices, buffers and engines in order, exiting with the error's code and message).
#pragma once

#include <string>
#include <string_view>

namespace fh::util {

/// When the environment variable FH_FAULT is `stage` (fail its first pass) or `stage:N` (its
/// N-th pass), throws UsageError (exit 2) "fault injected at <stage> (FH_FAULT)". Otherwise does
/// nothing (one getenv, read once). Thread-safe. The stages are listed in docs/architecture.md.
void fault_point(std::string_view stage);

/// The feature the environment variable FH_PLANT_LOOKAHEAD names ("" when it is not set; read
/// once). The data layer then plants a one-bar look-ahead on purpose: that feature's value at
/// every bar becomes the next bar's (data::load_market), so that the tests can check that the
/// look-ahead audit (`foxhunt-train audit`, docs/look-ahead-audit.md) catches and names it. Never
/// a profile key: a test hook only.
const std::string& planted_lookahead_feature();

}  // namespace fh::util
