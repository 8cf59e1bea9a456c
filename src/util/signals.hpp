/// @file signals.hpp
/// @brief SIGINT/SIGTERM handling for a clean stop (exit code 130).
///
/// The first SIGINT or SIGTERM only sets a flag (and writes one fixed line to stderr with
/// write(2), the only async-signal-safe output). The trainer polls interrupt_requested() once
/// per iteration; when it is set, it finishes the step in progress, writes a checkpoint and
/// summary.json with status "interrupted", and exits with ExitCode::interrupted (130).
/// A second signal calls _exit(130) at once: nothing is flushed, but every file we write is
/// written atomically (temporary + rename), so no half-written checkpoint or summary remains;
/// metrics.jsonl loses at most the line being written.
#pragma once

namespace fh::signals {

/// Installs the handlers for SIGINT and SIGTERM (sigaction, SA_RESTART), remembering the
/// previous ones. Idempotent.
void install_interrupt_handlers();
/// Restores the handlers that were in place before install_interrupt_handlers().
void uninstall_interrupt_handlers();
/// True once a first SIGINT/SIGTERM arrived. Lock-free, cheap: poll it every iteration.
bool interrupt_requested() noexcept;
/// The signal number that set the flag (SIGINT or SIGTERM), 0 when none.
int interrupt_signal() noexcept;
/// With --log-format json the two fixed lines are JSON objects ({"level":...,"message":...}),
/// like every other line on stderr. Call before install_interrupt_handlers().
void set_json_messages(bool json) noexcept;
/// Clears the flag and the signal count (tests only: a real run never un-requests a stop).
void reset_interrupt_for_tests() noexcept;

}  // namespace fh::signals
