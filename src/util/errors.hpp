/// @file errors.hpp
/// @brief Exit codes (docs/cli.md "Exit codes") and the exception types that carry them to main().
#pragma once

#include <stdexcept>
#include <string>

namespace fh {

/// Process exit codes. Documented in docs/cli.md and `foxhunt-train --help`.
enum class ExitCode : int {
    ok = 0,            ///< success, also an early-stopped run
    usage = 2,         ///< bad command line or profile
    data = 3,          ///< bad or unreadable market data
    device = 4,        ///< no device, no cubin for its architecture, out of memory, CUDA error
    diverged = 5,      ///< the training guard gave up
    lookahead = 6,     ///< `audit` found a feature, statistic or decision that a later bar changed
    interrupted = 130  ///< SIGINT/SIGTERM (checkpoint and summary were written first)
};

/// Base of every error that ends the program with a specific exit code.
class Error : public std::runtime_error {
public:
    Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ExitCode code() const noexcept { return code_; }

private:
    ExitCode code_;
};

struct UsageError : Error {
    explicit UsageError(const std::string& m) : Error(ExitCode::usage, m) {}
};
struct DataError : Error {
    explicit DataError(const std::string& m) : Error(ExitCode::data, m) {}
};
struct DeviceError : Error {
    explicit DeviceError(const std::string& m) : Error(ExitCode::device, m) {}
};
struct InterruptedError : Error {
    explicit InterruptedError(const std::string& m) : Error(ExitCode::interrupted, m) {}
};
struct DivergedError : Error {
    explicit DivergedError(const std::string& m) : Error(ExitCode::diverged, m) {}
};

}  // namespace fh
