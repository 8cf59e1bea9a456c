/// @file chromium.hpp
/// @brief Renders a local HTML file to a PNG with headless Chromium (Debian `chromium`), for the
///        report tests: the page's console messages (errors, Content-Security-Policy refusals)
///        come back from Chromium's log. Where Chromium is not installed, `chromium_path()` is
///        empty and the tests print a visible notice instead, except under CI=true, where a
///        missing Chromium fails them (scripts/test.sh installs it there).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fh::test {

/// FH_CHROMIUM, else chromium or chromium-browser on PATH; "" when none.
inline std::string chromium_path() {
    if (const char* env = std::getenv("FH_CHROMIUM"); env != nullptr && *env != '\0') return env;
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':'))
        for (const char* name : {"chromium", "chromium-browser"}) {
            const auto p = std::filesystem::path(dir) / name;
            if (::access(p.c_str(), X_OK) == 0) return p.string();
        }
    return "";
}

/// Whether the environment says CI=true (scripts/test.sh then installs Chromium).
inline bool running_in_ci() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string(ci) == "true";
}

/// chromium_path() for a rendering check of `what`. Where Chromium is missing: under CI=true the
/// test fails (the check must run in CI); elsewhere a notice on stderr and "" (skip the check).
inline std::string chromium_for(const std::string& what) {
    std::string path = chromium_path();
    if (path.empty()) {
        if (running_in_ci())
            FAIL("chromium is not installed and CI=true: " << what
                                                           << " must be rendered in CI (scripts/test.sh installs the "
                                                              "Debian package chromium when CI=true)");
        std::fprintf(stderr, "NOTICE: chromium is not installed: %s is not rendered (apt-get install chromium)\n",
                     what.c_str());
    }
    return path;
}

/// `s` in single quotes for sh.
inline std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

/// A file:// URL of an absolute path, every byte outside [A-Za-z0-9/._-] percent-encoded.
inline std::string file_url(const std::filesystem::path& p) {
    std::string out = "file://";
    for (unsigned char c : std::filesystem::absolute(p).string()) {
        if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-')
            out += static_cast<char>(c);
        else {
            char b[4];
            std::snprintf(b, sizeof b, "%%%02X", c);
            out += b;
        }
    }
    return out;
}

struct Render {
    int code = -1;
    std::string log;                   ///< Chromium's stderr
    std::vector<std::string> console;  ///< the page's console lines and policy refusals
    std::uintmax_t png_bytes = 0;
    bool png_signature = false;
};

/// Renders `html` to `png` (width x height) with the flags of a closed network.
inline Render render_with_chromium(const std::string& chromium, const std::filesystem::path& html,
                                   const std::filesystem::path& png, int width = 1000, int height = 2400) {
    namespace fs = std::filesystem;
    const fs::path profile = png.parent_path() / ("chromium-profile-" + std::to_string(::getpid()));
    const fs::path log = png.parent_path() / ("chromium-" + std::to_string(::getpid()) + ".log");
    const std::string cmd = shell_quote(chromium) +
                            " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                            "--disable-background-networking --disable-component-update --disable-sync "
                            "--hide-scrollbars --enable-logging=stderr --v=0 --user-data-dir=" +
                            shell_quote(profile.string()) + " --window-size=" + std::to_string(width) + "," +
                            std::to_string(height) + " --screenshot=" + shell_quote(png.string()) + " " +
                            shell_quote(file_url(html)) + " 2>" + shell_quote(log.string()) + " >/dev/null";
    Render r;
    const int status = std::system(cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
        r.log += line + "\n";
        if (line.find(":CONSOLE") != std::string::npos || line.find("Refused to") != std::string::npos ||
            line.find("Uncaught") != std::string::npos)
            r.console.push_back(line);
    }
    std::error_code ec;
    r.png_bytes = fs::exists(png, ec) ? fs::file_size(png, ec) : 0;
    std::ifstream p(png, std::ios::binary);
    char sig[8] = {};
    p.read(sig, 8);
    r.png_signature = std::string(sig, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
    fs::remove_all(profile, ec);
    fs::remove(log, ec);
    return r;
}

}  // namespace fh::test
