/// @file main.cpp
/// @brief Catch2 main. Without a CUDA device, [gpu] tests are excluded with a visible notice,
///        and a run that asks for [gpu] tests only exits 77, which `meson test` shows as SKIP.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "support/gpu.hpp"

int main(int argc, char** argv) {
    Catch::Session session;
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;

    std::string why;
    if (!fh::test::gpu_available(&why)) {
        auto& filters = session.configData().testsOrTags;
        for (const auto& f : filters) {
            if (f.find("[gpu]") != std::string::npos && f.find("~[gpu]") == std::string::npos) {
                std::printf("SKIP: [gpu] tests not run: no CUDA device (%s)\n", why.c_str());
                return 77;
            }
        }
        std::printf("NOTICE: no CUDA device (%s): [gpu] tests are excluded from this run\n", why.c_str());
        // In a Catch2 spec ',' separates alternatives and juxtaposition means AND: exclude [gpu]
        // from every alternative.
        if (filters.empty()) filters.push_back("~[.]");  // the default run skips hidden tests
        for (auto& f : filters) {
            std::string out;
            for (char c : f) out += c == ',' ? std::string(",~[gpu]") : std::string(1, c);
            f = "~[gpu]" + out;  // in front: after a test name, "~[gpu]" would be read as part of it
        }
        session.useConfigData(session.configData());
    }
    return session.run();
}
