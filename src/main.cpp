/// @file main.cpp
/// @brief Command-line wiring only: options and subcommands to fh::cli entry points, exceptions
///        to exit codes (README "Exit codes").
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "build_config.hpp"
#include "cli/commands.hpp"
#include "cuda/check.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace {

constexpr const char* kFooter = R"(Examples:
  foxhunt-train info                      devices and embedded kernel modules
  foxhunt-train info --device cpu

Exit codes:
  0    success (also an early-stopped run)
  2    usage or profile error
  3    data error
  4    device error (no device, no cubin for its architecture, out of memory)
  5    training diverged (the guard gave up)
  130  interrupted (SIGINT/SIGTERM; checkpoint and summary are written first)
)";

void configure_logging(const fh::cli::GlobalOptions& g) {
    const auto level = g.quiet ? fh::log::Level::warn
                       : g.verbose ? fh::log::Level::debug
                                   : fh::log::Level::info;
    fh::log::configure(level, g.log_format == "json" ? fh::log::Format::json : fh::log::Format::text);
    fh::cuda::set_sync_debug(g.cuda_sync_debug);
}

}  // namespace

int main(int argc, char** argv) {
    fh::cli::GlobalOptions g;
    CLI::App app{"foxhunt-train: GPU trainer for reinforcement-learning futures trading agents",
                 "foxhunt-train"};
    app.footer(kFooter);
    app.set_version_flag("--version", std::string("foxhunt-train ") + FH_VERSION);
    app.require_subcommand(1);
    app.add_option("--device", g.device, "Compute device: auto (GPU if present), cpu, cuda, cuda:N")
        ->capture_default_str();
    auto* quiet = app.add_flag("-q,--quiet", g.quiet, "Only warnings and errors");
    app.add_flag("-v,--verbose", g.verbose, "Debug output")->excludes(quiet);
    app.add_option("--log-format", g.log_format, "Log line format")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    app.add_flag("--cuda-sync-debug", g.cuda_sync_debug,
                 "Synchronize after every kernel launch so that a GPU fault names its kernel (slow)");

    auto* info = app.add_subcommand("info", "Show the GPU(s), driver and the embedded kernel modules");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : static_cast<int>(fh::ExitCode::usage);
    }

    try {
        configure_logging(g);
        if (info->parsed()) return fh::cli::run_info(g);
    } catch (const fh::Error& e) {
        fh::log::error("{}", e.what());
        return static_cast<int>(e.code());
    } catch (const std::exception& e) {
        fh::log::error("internal error: {}", e.what());
        return 1;
    }
    return 0;
}
