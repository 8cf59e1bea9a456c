/// @file test_csv_bars.cpp
/// @brief CSV reader: bad files name the right line and problem; good variants load.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/csv_bars.hpp"
#include "data/load.hpp"
#include "data_test_util.hpp"
#include "util/errors.hpp"

using fh::data::parse_csv_bars;

namespace {

/// The DataError message of parsing `text`, or "" when it parses.
std::string error_of(const std::string& text) {
    try {
        parse_csv_bars(text, "bars.csv");
    } catch (const fh::DataError& e) {
        return e.what();
    }
    return "";
}

const char* kGood =
    "timestamp,open,high,low,close,volume\n"
    "2024-01-02,100,101,99,100.5,1000\n"
    "2024-01-03,100.5,102,100,101.5,1200\n"
    "2024-01-04,101.5,101.5,98,99,900\n";

}  // namespace

TEST_CASE("csv: a good file loads with its values", "[data]") {
    const auto b = parse_csv_bars(kGood, "bars.csv");
    REQUIRE(b.size() == 3);
    CHECK(b.has_volume);
    CHECK(b.time[0] == 1704153600);  // 2024-01-02T00:00:00Z
    CHECK(b.time[1] - b.time[0] == 86400);
    CHECK(b.open[1] == 100.5);
    CHECK(b.high[1] == 102);
    CHECK(b.low[2] == 98);
    CHECK(b.close[2] == 99);
    CHECK(b.volume[1] == 1200);
    CHECK(b.segment_starts == std::vector<std::size_t>{0});
    CHECK(b.segment_names == std::vector<std::string>{"bars.csv"});
}

TEST_CASE("csv: good variants load (CRLF, BOM, extra columns, order, case, no volume, quotes)", "[data]") {
    std::string crlf;
    for (const char* p = kGood; *p; ++p) {
        if (*p == '\n') crlf += '\r';
        crlf += *p;
    }
    const auto a = parse_csv_bars(crlf, "crlf.csv");
    CHECK(a.size() == 3);
    CHECK(a.close[2] == 99);
    const auto bom = parse_csv_bars("\xEF\xBB\xBF" + std::string(kGood), "bom.csv");
    CHECK(bom.size() == 3);
    const auto bom_crlf = parse_csv_bars("\xEF\xBB\xBF" + crlf, "bomcrlf.csv");
    CHECK(bom_crlf.size() == 3);
    const auto extra = parse_csv_bars(
        "Symbol,Date,Open,High,Low,Close,Volume,OpenInterest\n"
        "ES,2024-01-02,100,101,99,100.5,1000,5\n"
        "ES,2024-01-03,100.5,102,100,101.5,1200,6\n",
        "extra.csv");
    CHECK(extra.size() == 2);
    CHECK(extra.close[1] == 101.5);
    const auto reordered = parse_csv_bars(
        "CLOSE,low,HIGH,Open,DateTime\n"
        "100.5,99,101,100,2024-01-02T09:30:00Z\n"
        "101,100,101.25,100.5,2024-01-02T09:35:00Z\n",
        "reordered.csv");
    CHECK(reordered.size() == 2);
    CHECK_FALSE(reordered.has_volume);
    CHECK(reordered.volume == std::vector<double>{0, 0});
    CHECK(reordered.time[1] - reordered.time[0] == 300);
    CHECK(reordered.open[0] == 100);
    const auto quoted = parse_csv_bars(
        "\"time\",\"open\",\"high\",\"low\",\"close\"\n"
        "1700000000,\"1.5\",2,1,1.5\n"
        "1700000060, 1.5 ,2,1,1.75\n\n\n",  // spaces around fields, blank lines at the end
        "quoted.csv");
    CHECK(quoted.size() == 2);
    CHECK(quoted.time[1] == 1700000060);
    const auto no_final_newline = parse_csv_bars("time,open,high,low,close\n1,1,1,1,1", "n.csv");
    CHECK(no_final_newline.size() == 1);
}

TEST_CASE("csv: time formats", "[data]") {
    std::string why;
    using fh::data::parse_time;
    CHECK(parse_time("0", &why) == 0);
    CHECK(parse_time("1704153600", &why) == 1704153600);
    CHECK(parse_time("2024-01-02", &why) == 1704153600);
    CHECK(parse_time("2024-01-02T09:30", &why) == 1704153600 + 9 * 3600 + 30 * 60);
    CHECK(parse_time("2024-01-02 09:30:15", &why) == 1704153600 + 9 * 3600 + 30 * 60 + 15);
    CHECK(parse_time("2024-01-02T09:30:15.250Z", &why) == 1704153600 + 9 * 3600 + 30 * 60 + 15);
    CHECK(parse_time("2024-01-02T09:30:00-05:00", &why) == 1704153600 + 14 * 3600 + 30 * 60);
    CHECK(parse_time("2024-01-02T09:30:00+0100", &why) == 1704153600 + 8 * 3600 + 30 * 60);
    CHECK(parse_time("2024-02-29", &why) == 1709164800);  // leap day
    CHECK(parse_time("1969-12-31T23:59:59Z", &why) == -1);
    CHECK_FALSE(parse_time("2023-02-29", &why));
    CHECK_FALSE(parse_time("2024-13-01", &why));
    CHECK_FALSE(parse_time("2024-01-02T24:00", &why));
    CHECK_FALSE(parse_time("2024-01-02T09:30:00+25:00", &why));
    CHECK_FALSE(parse_time("02/01/2024", &why));
    CHECK_FALSE(parse_time("1704153600000", &why));  // milliseconds
    CHECK(why.find("milliseconds") != std::string::npos);
    CHECK_FALSE(parse_time("2024-01-02T09:30:00Q", &why));
    CHECK_FALSE(parse_time("", &why));
    CHECK(fh::data::format_time(1704153600 + 3661) == "2024-01-02T01:01:01Z");
    CHECK(fh::data::format_time(-1) == "1969-12-31T23:59:59Z");
    for (std::int64_t t : {0LL, 951782400LL, 4102444800LL, 1709164800LL + 86399})
        CHECK(parse_time(fh::data::format_time(t), &why) == t);
}

TEST_CASE("csv: bad files name the line and what is wrong", "[data]") {
    const std::string H = "timestamp,open,high,low,close,volume\n";
    const std::string r1 = "2024-01-02,100,101,99,100.5,1000\n";
    const std::string r2 = "2024-01-03,100.5,102,100,101.5,1200\n";
    struct Case {
        const char* what;
        std::string text;
        const char* where;  // "bars.csv:LINE:"
        const char* says;   // a fragment of the message
    };
    const Case cases[] = {
        {"empty file", "", "bars.csv:1:", "empty file"},
        {"whitespace only", "\n\r\n  \n", "bars.csv:1:", "empty file"},
        {"header only", H, "bars.csv:1:", "no data rows"},
        {"BOM then nothing", "\xEF\xBB\xBF", "bars.csv:1:", "empty file"},
        {"missing close", "timestamp,open,high,low,volume\n2024-01-02,1,1,1,1\n",
         "bars.csv:1:", "missing column 'close'"},
        {"missing time", "when,open,high,low,close\n2024-01-02,1,1,1,1\n",
         "bars.csv:1:", "missing column a time column"},
        {"two time columns", "date,time,open,high,low,close\n", "bars.csv:1:", "two time columns"},
        {"duplicate column", "time,open,open,high,low,close\n", "bars.csv:1:", "repeats column"},
        {"semicolon delimiter", "timestamp;open;high;low;close\n2024-01-02;1;1;1;1\n",
         "bars.csv:1:", "wrong delimiter"},
        {"tab delimiter", "timestamp\topen\thigh\tlow\tclose\n", "bars.csv:1:", "wrong delimiter"},
        {"duplicate time", H + r1 + r1, "bars.csv:3:", "duplicate of the previous row's 2024-01-02T00:00:00Z (line 2)"},
        {"time going back", H + r2 + r1, "bars.csv:3:", "before the previous row's"},
        {"NaN price", H + r1 + "2024-01-03,nan,102,100,101.5,1200\n",
         "bars.csv:3:", "open is 'nan'; expected a finite number"},
        {"inf price", H + r1 + "2024-01-03,100,inf,100,101.5,1200\n", "bars.csv:3:", "high is 'inf'"},
        {"negative price", H + "2024-01-02,-100,101,-101,100.5,1000\n", "bars.csv:2:", "expected a positive price"},
        {"zero price", H + "2024-01-02,0,101,0,100.5,1000\n", "bars.csv:2:", "expected a positive price"},
        {"high < low", H + r1 + "2024-01-03,100.5,99,100,100,1200\n", "bars.csv:3:", "high 99 < low 100"},
        {"low above open", H + "2024-01-02,100,101,100.2,100.5,1000\n",
         "bars.csv:2:", "low 100.2 is above min(open, close) = 100"},
        {"high below close", H + "2024-01-02,100,101,99,101.5,1000\n",
         "bars.csv:2:", "high 101 is below max(open, close) = 101.5"},
        {"negative volume", H + "2024-01-02,100,101,99,100.5,-1\n", "bars.csv:2:", "expected a volume >= 0"},
        {"extreme price", H + r1 + "2024-01-03,1e300,1e300,1e300,1e300,1200\n",
         "bars.csv:3:", "open is '1e300'; expected a price in [1e-09, 1000000000]"},
        {"tiny price", H + "2024-01-02,1e-12,1e-12,1e-12,1e-12,1000\n", "bars.csv:2:", "expected a price in [1e-09,"},
        {"not a number", H + r1 + "2024-01-03,100.5,10x2,100,101.5,1200\n",
         "bars.csv:3:", "high '10x2' is not a number"},
        {"empty field", H + "2024-01-02,100,,99,100.5,1000\n", "bars.csv:2:", "high '' is not a number"},
        {"truncated last line", H + r1 + r2 + "2024-01-04,101.5,102",
         "bars.csv:4:", "truncated line: 3 fields, expected 6"},
        {"too many fields", H + "2024-01-02,100,101,99,100.5,1000,7\n", "bars.csv:2:", "too many fields"},
        {"row with semicolons", H + r1 + "2024-01-03;100.5;102;100;101.5;1200\n",
         "bars.csv:3:", "wrong delimiter: no comma"},
        {"bad date", H + "2024-02-30,100,101,99,100.5,1000\n", "bars.csv:2:", "day out of range"},
        {"garbage time", H + "yesterday,100,101,99,100.5,1000\n", "bars.csv:2:", "is not a valid time"},
        {"blank line in the middle", H + r1 + "\n" + r2, "bars.csv:3:", "empty line"},
        {"CRLF with an error", "time,open,high,low,close\r\n1,1,1,1,1\r\n2,1,1,1,x\r\n",
         "bars.csv:3:", "close 'x' is not a number"},
        {"BOM with an error", "\xEF\xBB\xBFtime,open,high,low,close\n1,1,1,1,1\n1,1,1,1,1\n",
         "bars.csv:3:", "duplicate"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const std::string msg = error_of(c.text);
        INFO(msg);
        CHECK(msg.rfind(c.where, 0) == 0);
        CHECK(msg.find(c.says) != std::string::npos);
    }
}

TEST_CASE("csv: a bad file through load_market is a DataError (exit 3) naming file and line", "[data]") {
    fh::test::TempDir dir;
    const std::string path = dir.file("bad.csv");
    fh::test::write_text(path, "time,open,high,low,close\n1,1,1,1,1\n2,1,1,1,1\n3,1,0.5,1,1\n");
    fh::data::DataOptions o;
    o.path = path;
    o.use_cache = false;
    try {
        fh::data::load_market(o);
        FAIL("no error");
    } catch (const fh::DataError& e) {
        CHECK(e.code() == fh::ExitCode::data);
        CHECK(std::string(e.what()).rfind(path + ":4: high 0.5 < low 1", 0) == 0);
    }
    o.path = dir.file("missing.csv");
    CHECK_THROWS_AS(fh::data::load_market(o), fh::DataError);
}

TEST_CASE("csv: a directory of contract files gives one segment per file", "[data]") {
    fh::test::TempDir dir;
    // Named so that name order differs from time order: ordering is by first bar.
    fh::test::write_text(dir.file("b_ESH24.csv"), "time,open,high,low,close\n100,1,1,1,1\n200,1,1,1,1\n");
    fh::test::write_text(dir.file("a_ESM24.csv"), "time,open,high,low,close\n300,2,2,2,2\n400,2,2,2,2\n500,2,2,2,2\n");
    fh::test::write_text(dir.file("notes.txt"), "ignored");
    const auto b = fh::data::read_csv_directory(dir.path.string());
    REQUIRE(b.size() == 5);
    CHECK(b.segment_starts == std::vector<std::size_t>{0, 2});
    CHECK(b.segment_names[0] == dir.file("b_ESH24.csv"));
    CHECK(b.segment_begin(1) == 0);
    CHECK(b.segment_end(1) == 2);
    CHECK(b.segment_begin(2) == 2);
    CHECK(b.segment_begin(4) == 2);
    CHECK(b.segment_end(4) == 5);
    CHECK(b.close[2] == 2);

    // Overlapping contracts are an error naming both files.
    fh::test::write_text(dir.file("c_ESU24.csv"), "time,open,high,low,close\n450,3,3,3,3\n600,3,3,3,3\n");
    try {
        fh::data::read_csv_directory(dir.path.string());
        FAIL("no error");
    } catch (const fh::DataError& e) {
        const std::string m = e.what();
        CHECK(m.find("c_ESU24.csv:2: first bar") != std::string::npos);
        CHECK(m.find("a_ESM24.csv") != std::string::npos);
        CHECK(m.find("must not overlap") != std::string::npos);
    }
    fh::test::TempDir empty;
    CHECK_THROWS_AS(fh::data::read_csv_directory(empty.path.string()), fh::DataError);
}

TEST_CASE("csv: mutated files either load or raise a DataError naming a line", "[data]") {
    // A cheap fuzz: random byte edits of a good file never crash or throw anything else.
    std::string base = "timestamp,open,high,low,close,volume\n";
    char row[96];
    for (int i = 0; i < 40; ++i) {
        std::snprintf(row, sizeof row, "2024-01-%02dT%02d:00:00Z,100,101,99,100.5,1000\n", 1 + i / 24, i % 24);
        base += row;
    }
    std::uint64_t x = 12345;
    auto rnd = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 33; };
    const char alphabet[] = "0123456789,.-+:TZ \r\n\"eE;\t\xEF\xBB\xBFnai";
    int loaded = 0, rejected = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        std::string s = base;
        const int edits = 1 + static_cast<int>(rnd() % 4);
        for (int e = 0; e < edits; ++e) {
            const std::size_t pos = rnd() % s.size();
            switch (rnd() % 3) {
                case 0:
                    s[pos] = alphabet[rnd() % (sizeof alphabet - 1)];
                    break;
                case 1:
                    s.erase(pos, 1 + rnd() % 8);
                    break;
                default:
                    s.insert(pos, 1, alphabet[rnd() % (sizeof alphabet - 1)]);
            }
            if (s.empty()) s.push_back('x');
        }
        try {
            const auto b = parse_csv_bars(s, "fuzz.csv");
            ++loaded;
            for (std::size_t i = 0; i < b.size(); ++i) {
                REQUIRE(b.low[i] <= std::min(b.open[i], b.close[i]));
                REQUIRE(b.high[i] >= std::max(b.open[i], b.close[i]));
                if (i > 0) REQUIRE(b.time[i] > b.time[i - 1]);
            }
        } catch (const fh::DataError& e) {
            ++rejected;
            REQUIRE(std::string(e.what()).rfind("fuzz.csv:", 0) == 0);
        }
    }
    CHECK(loaded > 0);
    CHECK(rejected > 0);
}

TEST_CASE("csv: suspicious but valid data is loaded with a remark (gaps, jumps, centuries)", "[data]") {
    using namespace fh::data;
    BarSeries b;
    b.has_volume = false;
    b.segment_names = {"x"};
    for (int i = 0; i < 200; ++i) {
        b.time.push_back(1'600'000'000LL + i * 86400LL);
        for (auto* v : {&b.open, &b.high, &b.low, &b.close}) v->push_back(100.0);
        b.volume.push_back(0);
    }
    CHECK(sanity_warnings(b).empty());
    CHECK(check_bar_series(b, true).empty());
    // a 50-year gap (a mistyped year) after bar 99
    for (int i = 100; i < 200; ++i) b.time[i] += 50LL * 365 * 86400;
    auto w = sanity_warnings(b);
    REQUIRE(w.size() == 1);  // the gap (the span, 50 years, is not remarked)
    CHECK_THAT(w[0], Catch::Contains("a gap of 18251 days between bar 99"));
    CHECK_THAT(w[0], Catch::Contains("a mistyped year?"));
    // a 1000-fold jump in one bar
    b.close[150] = b.open[150] = b.high[150] = b.low[150] = 1e5;
    w = sanity_warnings(b);
    CHECK_THAT(w.back(), Catch::Contains("bar 150"));
    CHECK_THAT(w.back(), Catch::Contains("1000-fold move"));
    // a gap in a daily series of weekends and holidays is not remarked
    BarSeries d = b;
    for (int i = 0; i < 200; ++i) d.time[i] = 1'600'000'000LL + i * 86400LL + (i / 5) * 2 * 86400LL;
    d.close.assign(200, 100.0);
    d.open = d.high = d.low = d.close;
    CHECK(sanity_warnings(d).empty());
}
