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

template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
    emit(Level::debug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
    emit(Level::info, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
    emit(Level::warn, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void error(fmt::format_string<A...> f, A&&... a) {
    emit(Level::error, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace fh::log
