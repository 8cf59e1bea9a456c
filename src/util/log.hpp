/// @file log.hpp
/// @brief Logging front end: fmt formatting here, spdlog behind one translation unit (log.cpp),
///        so that the heavy spdlog headers are compiled once.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace fh::log {

enum class Level { debug, info, warn, error, off };
enum class Format { text, json };

/// Sets up the process-wide logger (stderr). Safe to call again to change level or format.
void configure(Level level, Format format);
void emit(Level level, std::string_view message);
/// The format set by configure() (text by default).
Format current_format() noexcept;
/// True when messages of `level` are shown (false for info under --quiet).
bool shows(Level level) noexcept;

/// log::debug, log::info, log::warn, log::error: `(format, args...)` formats a message (fmt,
/// checked at compile time) and emits it at that level.
template <Level L>
struct Emitter {
    template <class... A>
    void operator()(fmt::format_string<A...> f, A&&... a) const {
        emit(L, fmt::format(f, std::forward<A>(a)...));
    }
};
inline constexpr Emitter<Level::debug> debug;
inline constexpr Emitter<Level::info> info;
inline constexpr Emitter<Level::warn> warn;
inline constexpr Emitter<Level::error> error;

}  // namespace fh::log
