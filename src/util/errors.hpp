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

/// The error of one exit code (a type of its own per code, so each can be caught alone).
template <ExitCode C>
struct CodedError : Error {
    explicit CodedError(const std::string& m) : Error(C, m) {}
};
using UsageError = CodedError<ExitCode::usage>;
using DataError = CodedError<ExitCode::data>;
using DeviceError = CodedError<ExitCode::device>;
using InterruptedError = CodedError<ExitCode::interrupted>;
using DivergedError = CodedError<ExitCode::diverged>;

}  // namespace fh
