/// @file fault.cpp
#include "util/fault.hpp"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <string>

#include "util/errors.hpp"

namespace fh::util {
namespace {

struct Fault {
    std::string stage;  ///< "" when FH_FAULT is not set
    long long pass = 1;
};

const Fault& configured() {
    static const Fault fault = [] {
        Fault f;
        const char* text = std::getenv("FH_FAULT");
        if (text == nullptr) return f;
        const std::string_view s(text);
        const auto colon = s.find(':');
        f.stage = std::string(s.substr(0, colon));
        if (colon != std::string_view::npos) {
            const auto n = s.substr(colon + 1);
            const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), f.pass);
            if (ec != std::errc() || ptr != n.data() + n.size() || f.pass < 1) f.pass = 1;
        }
        return f;
    }();
    return fault;
}

}  // namespace

void fault_point(std::string_view stage) {
    const Fault& f = configured();
    if (f.stage.empty() || f.stage != stage) return;
    static std::atomic<long long> passes{0};  // only the configured stage counts
    if (++passes != f.pass) return;
    throw UsageError(fmt::format("fault injected at {} (FH_FAULT)", stage));
}

const std::string& planted_lookahead_feature() {
    static const std::string feature = [] {
        const char* text = std::getenv("FH_PLANT_LOOKAHEAD");
        return std::string(text == nullptr ? "" : text);
    }();
    return feature;
}

}  // namespace fh::util
