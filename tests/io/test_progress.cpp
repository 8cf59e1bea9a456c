/// @file test_progress.cpp
/// @brief The progress line: disabled it writes nothing; enabled it draws with '\r', rate
///        limits its redraws and ends with a newline; the line's fields and width.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "io/progress.hpp"

using namespace fh::io;

namespace {
struct TempOut {
    std::FILE* f = std::tmpfile();
    ~TempOut() { std::fclose(f); }
    std::string text() const {
        std::fflush(f);
        std::rewind(f);
        std::string s;
        for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
        return s;
    }
};
}  // namespace

TEST_CASE("progress: disabled writes nothing", "[io][progress]") {
    TempOut out;
    REQUIRE(out.f);
    {
        Progress p(1000, false, out.f);
        CHECK_FALSE(p.enabled());
        p.update(10, 100.0, 5.0, 0.5, 1.25, "sharpe");
        p.update(1000, 100.0, 5.0, 0.5, std::nullopt, "sharpe");
        p.clear();
        p.finish();
    }
    CHECK(out.text().empty());
}

TEST_CASE("progress: enabled draws in place, limits redraws, ends with a newline", "[io][progress]") {
    TempOut out;
    REQUIRE(out.f);
    {
        Progress p(1000, true, out.f);
        p.update(100, 50.0, 5.0, 0.25, std::nullopt, "sharpe");
        p.update(200, 50.0, 5.0, 0.25, std::nullopt, "sharpe");  // within 100 ms: not drawn
        p.update(1000, 50.0, 5.0, 0.125, 1.5, "sharpe");         // the total: always drawn
        p.finish();
        p.finish();  // idempotent
    }
    const std::string s = out.text();
    CHECK(s.front() == '\r');
    CHECK(s.back() == '\n');
    CHECK(s.find(" 10.0%") != std::string::npos);
    CHECK(s.find(" 20.0%") == std::string::npos);
    CHECK(s.find("100.0%") != std::string::npos);
    CHECK(s.find("val sharpe 1.5") != std::string::npos);
    CHECK(std::count(s.begin(), s.end(), '\n') == 1);
}

TEST_CASE("progress: the line's fields and width", "[io][progress]") {
    ProgressState st;
    st.env_steps = 400'000;
    st.total_env_steps = 1'000'000;
    st.env_steps_per_s = 6'100;
    st.updates_per_s = 95;
    st.loss = 0.0123;
    st.last_val_metric = 1.2345;
    st.metric_name = "sharpe";
    const std::string line = format_progress_line(st, 200);
    CHECK(line ==
          "[############------------------]  40.0% ETA 1m38s | 400k/1.00M steps | 6.10k env/s | "
          "95 upd/s | loss 0.0123 | val sharpe 1.234");
    for (int w : {1, 10, 40, 80, 100})
        CHECK(format_progress_line(st, w).size() <= static_cast<std::size_t>(std::max(w - 1, 1)));
    CHECK(format_progress_line(st, 80).front() != '[');  // no room for a bar of 10 cells
    st.env_steps_per_s = 0;
    CHECK(format_progress_line(st, 200).find("ETA --") != std::string::npos);
    CHECK(format_eta(5) == "5s");
    CHECK(format_eta(187) == "3m07s");
    CHECK(format_eta(7500) == "2h05m");
    CHECK(format_count(950) == "950");
    CHECK(format_count(12'345) == "12.3k");
    CHECK(format_count(4'000'000) == "4.00M");
    CHECK(format_count(1.2e9) == "1.20G");
}
