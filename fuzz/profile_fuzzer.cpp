/// @file profile_fuzzer.cpp
/// @brief libFuzzer harness for the profile parser (toml++ 3.3.0 behind our UTF-8 check, the
///        resolver, the emitter). Built by fuzz/build.sh, outside the Meson build.
///
/// Input: a profile text. If it contains a line "#SET <text>", each such line is also passed as
/// a `--set` override. Properties checked on every input:
///   - resolution either succeeds or throws ProfileError (a UsageError, exit 2) with at least
///     one message, each starting with a location;
///   - a resolved profile round-trips: to_toml() resolves to the same Profile and the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
    std::fprintf(stderr, "PROPERTY VIOLATED: %s\n%s\n", what, detail.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> overrides;
    for (std::size_t pos = 0; pos < text.size();) {
        const auto end = std::min(text.find('\n', pos), text.size());
        const auto line = text.substr(pos, end - pos);
        if (line.substr(0, 5) == "#SET ") overrides.emplace_back(line.substr(5));
        pos = end + 1;
    }
    try {
        const auto p = fh::config::resolve_profile_text(text, "fuzz.toml", overrides);
        const auto emitted = fh::config::to_toml(p);
        fh::config::Profile q;
        try {
            q = fh::config::resolve_profile_text(emitted, "emitted.toml");
        } catch (const fh::config::ProfileError& e) {
            fail("the emitted profile does not resolve", std::string(e.what()) + "\n" + emitted);
        }
        if (!(q == p)) fail("round trip changed the profile", emitted);
        if (fh::config::to_toml(q) != emitted) fail("round trip changed the text", emitted);
    } catch (const fh::config::ProfileError& e) {
        if (e.problems().empty()) fail("ProfileError without problems", "");
        if (e.code() != fh::ExitCode::usage) fail("ProfileError with an exit code other than 2", "");
        for (const auto& m : e.problems())
            if (m.rfind("fuzz.toml:", 0) != 0 && m.rfind("--set ", 0) != 0) fail("a problem without a location", m);
    }
    return 0;
}
