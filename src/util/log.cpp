/// @file log.cpp
/// @brief The only translation unit that includes spdlog.
#include "util/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <mutex>

#include "util/json_string.hpp"

namespace fh::log {
namespace {

std::mutex g_mutex;
std::shared_ptr<spdlog::logger> g_logger;
Format g_format = Format::text;

constexpr auto kTextPattern = "%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v";

spdlog::level::level_enum to_spdlog(Level l) {
    static constexpr spdlog::level::level_enum kLevels[] = {spdlog::level::debug, spdlog::level::info,
                                                            spdlog::level::warn, spdlog::level::err,
                                                            spdlog::level::off};  // index: Level
    static_assert(std::size(kLevels) == static_cast<std::size_t>(Level::off) + 1, "one per Level");
    const auto i = static_cast<std::size_t>(l);
    return i < std::size(kLevels) ? kLevels[i] : spdlog::level::info;
}
spdlog::logger& logger() {
    if (!g_logger) {
        g_logger = spdlog::stderr_color_mt("foxhunt");
        g_logger->set_pattern(kTextPattern);
    }
    return *g_logger;
}

}  // namespace

void configure(Level level, Format format) {
    std::lock_guard lock(g_mutex);
    auto& l = logger();
    l.set_level(to_spdlog(level));
    g_format = format;
    l.set_pattern(format == Format::json ? R"({"time":"%Y-%m-%dT%H:%M:%S.%e","level":"%l",%v})" : kTextPattern);
}

Format current_format() noexcept {
    return g_format;
}

bool shows(Level level) noexcept {
    return g_logger == nullptr || g_logger->should_log(to_spdlog(level));
}

void emit(Level level, std::string_view message) {
    std::lock_guard lock(g_mutex);
    auto& l = logger();
    if (g_format == Format::json)
        l.log(to_spdlog(level), "\"message\":{}", util::json_quote(message));
    else
        l.log(to_spdlog(level), "{}", message);
}

}  // namespace fh::log
