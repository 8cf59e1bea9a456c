/// @file commands.hpp
/// @brief The subcommands' entry points; main.cpp only wires the command line to them.
#pragma once

#include <string>

namespace fh::cli {

/// Options every subcommand accepts.
struct GlobalOptions {
    std::string device = "auto";  ///< auto | cpu | cuda | cuda:N
    bool quiet = false;
    bool verbose = false;
    std::string log_format = "text";  ///< text | json
    bool cuda_sync_debug = false;
};

/// `foxhunt-train info`: the devices, and the embedded kernel modules with their architectures.
int run_info(const GlobalOptions& options);

}  // namespace fh::cli
