/// @file export.cpp
/// @brief `foxhunt-train export RUN_DIR|CHECKPOINT -o FILE.safetensors`: the policy's weights as
///        named tensors (src/run/export.cpp writes them; this file only checks the options).
#include "cli/commands.hpp"
#include "run/run.hpp"

namespace fh::cli {

int run_export(const GlobalOptions& g, const std::string& source, const std::string& output) {
    (void)run::export_policy(source, output, g.force);
    return print_result(output);
}

}  // namespace fh::cli
