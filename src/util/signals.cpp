/// @file signals.cpp
#include "util/signals.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <string_view>

namespace fh::signals {
namespace {

// Only lock-free atomics may be touched from a signal handler.
std::atomic<int> g_count{0};
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

bool g_installed = false;
struct sigaction g_old_int {};
struct sigaction g_old_term {};

constexpr std::string_view kFirst =
    "\nfoxhunt-train: interrupt received: finishing the current step, then saving a checkpoint "
    "and the summary (interrupt again to quit at once)\n";
constexpr std::string_view kSecond = "\nfoxhunt-train: second interrupt: exiting now (exit code 130)\n";
constexpr std::string_view kFirstJson =
    "{\"level\":\"warning\",\"message\":\"interrupt received: finishing the current step, then saving a "
    "checkpoint and the summary (interrupt again to quit at once)\"}\n";
constexpr std::string_view kSecondJson =
    "{\"level\":\"warning\",\"message\":\"second interrupt: exiting now (exit code 130)\"}\n";
std::atomic<bool> g_json{false};

void write_stderr(std::string_view text) noexcept {
    const char* s = text.data();
    std::size_t n = text.size();
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= static_cast<std::size_t>(w);
    }
}

extern "C" void on_interrupt(int sig) {
    const int saved_errno = errno;
    const bool json = g_json.load(std::memory_order_relaxed);
    if (g_count.fetch_add(1) == 0) {
        g_signal.store(sig);
        write_stderr(json ? kFirstJson : kFirst);
    } else {
        write_stderr(json ? kSecondJson : kSecond);
        ::_exit(130);
    }
    errno = saved_errno;
}

}  // namespace

void install_interrupt_handlers() {
    if (g_installed) return;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);  // one handler at a time
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_installed = true;
}

void uninstall_interrupt_handlers() {
    if (!g_installed) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    g_installed = false;
}

void set_json_messages(bool json) noexcept {
    g_json.store(json);
}

bool interrupt_requested() noexcept {
    return g_count.load(std::memory_order_relaxed) > 0;
}

int interrupt_signal() noexcept {
    return g_signal.load(std::memory_order_relaxed);
}

void reset_interrupt_for_tests() noexcept {
    g_count.store(0);
    g_signal.store(0);
}

}  // namespace fh::signals
