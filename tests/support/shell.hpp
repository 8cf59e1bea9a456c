/// @file shell.hpp
/// @brief What the tests that run the executable share: read a file whole, a fresh scratch
///        directory, and a shell command line with the executable as $EXE, its stdout and stderr
///        captured.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fh::test {

struct ShellResult {
    int code = -1;  ///< the exit status (-1: killed by a signal)
    std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// An empty directory <tmp>/<prefix>-<pid>-<name> (removed first if it exists).
inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
    const auto p = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

/// Runs `script` in sh with $EXE = FH_TRAIN_EXE; stdout and stderr go through dir/out, dir/err.
inline ShellResult run_shell(const std::string& script, const std::filesystem::path& dir) {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    REQUIRE(exe != nullptr);
    const std::string cmd = "EXE='" + std::string(exe) + "'; " + script + " >'" + (dir / "out").string() + "' 2>'" +
                            (dir / "err").string() + "'";
    const int status = std::system(cmd.c_str());
    ShellResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir / "out");
    r.err = slurp(dir / "err");
    return r;
}

/// A shell command prefix that runs the command after it like a terminal's foreground job (a new
/// process group with the default SIGINT action: a shell's `&` would start it with SIGINT
/// ignored), sends the whole group one SIGINT, as a terminal's Ctrl-C, once `count` files matching
/// `pattern` (relative to the working directory) are non-empty or after 60 s, and exits with the
/// command's status.
inline std::string ctrl_c_once(const std::string& pattern, int count) {
    return "python3 -c '\n"
           "import glob, os, signal, subprocess, sys, time\n"
           "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
           "p = subprocess.Popen(sys.argv[1:], start_new_session=True)\n"
           "for _ in range(600):\n"
           "    runs = [d for d in glob.glob(\"" +
           pattern +
           "\") if os.path.getsize(d) > 0]\n"
           "    if len(runs) >= " +
           std::to_string(count) +
           ": break\n"
           "    time.sleep(0.1)\n"
           "os.killpg(p.pid, signal.SIGINT)\n"
           "sys.exit(p.wait())\n"
           "' ";
}

}  // namespace fh::test
