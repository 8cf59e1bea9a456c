/// @file csv_bars.cpp
/// @brief Strict, single-pass CSV bar reader: fields are string_views into the file buffer,
///        numbers go through std::from_chars, so a row costs no allocation.
#include "data/csv_bars.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "util/errors.hpp"
#include "util/regular_file.hpp"

namespace fh::data {
namespace {

enum class Role : std::uint8_t { ignore, time, open, high, low, close, volume };

constexpr std::string_view kTimeNames[] = {"timestamp", "date", "datetime", "time"};
constexpr std::string_view kColumnNames[] = {"open", "high", "low", "close", "volume"};  // Role::open on
constexpr std::string_view kFormatHint =
    "a header with a time column (timestamp, date, datetime or time) and open, high, low, close "
    "(volume optional), comma-separated";

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

/// Text of a field for an error message: quoted, shortened, control bytes escaped.
std::string show(std::string_view s) {
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < 40; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c >= 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    if (s.size() > 40) out += "...";
    return out + "'";
}

/// The role of a header's column named `n` (lower case).
Role role_of(std::string_view n) {
    if (std::find(std::begin(kTimeNames), std::end(kTimeNames), n) != std::end(kTimeNames)) return Role::time;
    const auto it = std::find(std::begin(kColumnNames), std::end(kColumnNames), n);
    if (it == std::end(kColumnNames)) return Role::ignore;
    return static_cast<Role>(static_cast<int>(Role::open) + (it - std::begin(kColumnNames)));
}

/// Whether a line or field is separated by ';' or tabs.
bool other_delimiter(std::string_view s) noexcept {
    return s.find(';') != std::string_view::npos || s.find('\t') != std::string_view::npos;
}

[[noreturn]] void fail(const std::string& name, std::size_t line, const std::string& what) {
    throw DataError(fmt::format("{}:{}: {}", name, line, what));
}

bool parse_digits(std::string_view s, std::size_t pos, std::size_t n, int* out) noexcept {
    if (pos + n > s.size()) return false;
    int v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

bool is_leap(std::int64_t y) noexcept {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
    static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29u : kDays[m - 1];
}

}  // namespace

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::string format_time(std::int64_t t) {
    std::int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    const std::int64_t sod = t - days * 86400;
    std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t y0 = static_cast<std::int64_t>(yoe) + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    const std::int64_t y = y0 + (m <= 2);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, m, d, sod / 3600, (sod / 60) % 60, sod % 60);
}

std::optional<std::int64_t> parse_time(std::string_view s, std::string* why) {
    auto bad = [&](const char* w) -> std::optional<std::int64_t> {
        if (why) *why = w;
        return std::nullopt;
    };
    if (s.empty()) return bad("empty time field");
    // Unix seconds: digits only.
    if (s.find_first_not_of("0123456789") == std::string_view::npos) {
        if (s.size() > 11) return bad("Unix time too large: expected seconds (milliseconds? divide by 1000)");
        std::int64_t v = 0;
        std::from_chars(s.data(), s.data() + s.size(), v);
        return v;
    }
    int y = 0, mo = 0, d = 0;
    if (s.size() < 10 || !parse_digits(s, 0, 4, &y) || s[4] != '-' || !parse_digits(s, 5, 2, &mo) || s[7] != '-' ||
        !parse_digits(s, 8, 2, &d))
        return bad("expected Unix seconds or an ISO-8601 date YYYY-MM-DD[THH:MM[:SS]]");
    if (mo < 1 || mo > 12) return bad("month out of range 01..12");
    if (d < 1 || static_cast<unsigned>(d) > days_in_month(y, static_cast<unsigned>(mo)))
        return bad("day out of range for the month");
    std::int64_t t = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400;
    if (s.size() == 10) return t;
    if (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
        return bad("expected 'T' or a space between date and time of day");
    int hh = 0, mm = 0, ss = 0;
    if (!parse_digits(s, 11, 2, &hh) || s.size() < 16 || s[13] != ':' || !parse_digits(s, 14, 2, &mm))
        return bad("expected a time of day HH:MM[:SS] after the date");
    std::size_t p = 16;
    if (p < s.size() && s[p] == ':') {
        if (!parse_digits(s, p + 1, 2, &ss)) return bad("expected two digits of seconds after HH:MM:");
        p += 3;
        if (p < s.size() && (s[p] == '.' || s[p] == ',')) {
            ++p;
            const std::size_t f0 = p;
            while (p < s.size() && s[p] >= '0' && s[p] <= '9') ++p;
            if (p == f0) return bad("expected digits after the decimal point of the seconds");
        }
    }
    if (hh > 23 || mm > 59 || ss > 59) return bad("time of day out of range (00:00:00..23:59:59)");
    t += hh * 3600 + mm * 60 + ss;
    if (p == s.size()) return t;
    if ((s[p] == 'Z' || s[p] == 'z') && p + 1 == s.size()) return t;
    if (s[p] == '+' || s[p] == '-') {
        const int sign = s[p] == '+' ? 1 : -1;
        int oh = 0, om = 0;
        if (!parse_digits(s, p + 1, 2, &oh)) return bad("expected a UTC offset +HH:MM");
        std::size_t q = p + 3;
        if (q < s.size() && s[q] == ':') ++q;
        if (!parse_digits(s, q, 2, &om) || q + 2 != s.size() || oh > 23 || om > 59)
            return bad("expected a UTC offset +HH:MM");
        return t - sign * (oh * 3600 + om * 60);  // local = UTC + offset
    }
    return bad("unexpected text after the time of day (expected Z or a +HH:MM offset)");
}

BarSeries parse_csv_bars(std::string_view text, const std::string& name) {
    text = util::without_bom(text);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
        fail(name, 1, fmt::format("empty file; expected {} and one row per bar", kFormatHint));

    const char* p = text.data();
    const char* const end = text.data() + text.size();
    auto next_line = [&](std::string_view* line) {
        const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        const char* le = nl ? nl : end;
        *line = std::string_view(p, static_cast<std::size_t>(le - p));
        if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
        p = nl ? nl + 1 : end;
    };

    // Header.
    std::string_view header;
    next_line(&header);
    if (header.find(',') == std::string_view::npos && other_delimiter(header))
        fail(name, 1,
             fmt::format("wrong delimiter: the header {} is separated by '{}'; expected {}", show(header),
                         header.find(';') != std::string_view::npos ? ";" : "\\t", kFormatHint));
    std::vector<Role> roles;
    std::vector<std::string> col_names;
    std::array<int, 7> seen{};  // first column of each role, +1
    for (std::size_t start = 0;;) {
        const std::size_t comma = header.find(',', start);
        const std::string_view raw =
            header.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        const std::string n = lower(trim(raw));
        const Role r = role_of(n);
        if (r != Role::ignore) {
            auto& s = seen[static_cast<std::size_t>(r)];
            if (s != 0)
                fail(name, 1,
                     fmt::format("column {} repeats column {} ({}); expected exactly one {} column", show(trim(raw)), s,
                                 r == Role::time ? "two time columns" : "same name", r == Role::time ? "time" : n));
            s = static_cast<int>(roles.size()) + 1;
        }
        roles.push_back(r);
        col_names.emplace_back(trim(raw));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    std::string missing = seen[1] == 0 ? "a time column (timestamp, date, datetime or time)" : "";
    for (std::size_t r = 2; r <= 5 && missing.empty(); ++r)
        if (seen[r] == 0) missing = fmt::format("'{}'", kColumnNames[r - 2]);
    if (!missing.empty())
        fail(name, 1,
             fmt::format("missing column {} in the header {}; expected {}", missing, show(header), kFormatHint));
    const std::size_t ncols = roles.size();

    BarSeries bars;
    bars.has_volume = seen[static_cast<std::size_t>(Role::volume)] != 0;
    bars.segment_names = {name};
    const auto rows_guess = static_cast<std::size_t>(std::count(p, end, '\n')) + 1;
    for (auto* v : {&bars.open, &bars.high, &bars.low, &bars.close, &bars.volume}) v->reserve(rows_guess);
    bars.time.reserve(rows_guess);

    std::size_t line_no = 1;
    std::size_t prev_line = 0;
    while (p < end) {
        std::string_view line;
        next_line(&line);
        ++line_no;
        if (line.find_first_not_of(" \t") == std::string_view::npos) {
            if (std::string_view(p, static_cast<std::size_t>(end - p)).find_first_not_of(" \t\r\n") ==
                std::string_view::npos)
                break;  // blank lines at the end of the file
            fail(name, line_no,
                 "empty line; expected a data row (blank lines are allowed only at the end of the file)");
        }
        if (ncols > 1 && line.find(',') == std::string_view::npos && other_delimiter(line))
            fail(name, line_no,
                 fmt::format("wrong delimiter: no comma in {}; expected {} comma-separated fields as in the header",
                             show(line), ncols));
        std::int64_t t = 0;
        double v[7] = {0, 0, 0, 0, 0, 0, 0};
        std::size_t k = 0, start = 0;
        for (;; ++k) {
            const std::size_t comma = line.find(',', start);
            if (k >= ncols)
                fail(name, line_no,
                     fmt::format("too many fields: expected {} as in the header (the delimiter is a comma)", ncols));
            const std::string_view f =
                trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
            const Role r = roles[k];
            if (r == Role::time) {
                std::string why;
                const auto pt = parse_time(f, &why);
                if (!pt) fail(name, line_no, fmt::format("{} {} is not a valid time: {}", col_names[k], show(f), why));
                t = *pt;
            } else if (r != Role::ignore) {
                double x = 0;
                const auto res = std::from_chars(f.data(), f.data() + f.size(), x);
                if (f.empty() || res.ec != std::errc() || res.ptr != f.data() + f.size())
                    fail(name, line_no,
                         fmt::format("{} {} is not a number{}", col_names[k], show(f),
                                     other_delimiter(f) ? " (wrong delimiter? fields are separated by commas)" : ""));
                if (!std::isfinite(x))
                    fail(name, line_no, fmt::format("{} is {}; expected a finite number", col_names[k], show(f)));
                if (r == Role::volume ? x < 0 : x <= 0)
                    fail(name, line_no,
                         fmt::format("{} is {}; expected {}", col_names[k], show(f),
                                     r == Role::volume ? "a volume >= 0" : "a positive price"));
                if (r != Role::volume && (x < kMinPrice || x > kMaxPrice))
                    fail(name, line_no,
                         fmt::format("{} is {}; expected a price in [{}, {}] (the environment's "
                                     "accounting and features are not built for more; wrong unit or "
                                     "a missing decimal point?)",
                                     col_names[k], show(f), kMinPrice, kMaxPrice));
                v[static_cast<std::size_t>(r)] = x;
            }
            if (comma == std::string_view::npos) break;
            start = comma + 1;
        }
        if (k + 1 < ncols)
            fail(name, line_no,
                 fmt::format("truncated line: {} field{}, expected {} as in the header{}", k + 1, k == 0 ? "" : "s",
                             ncols, other_delimiter(line) ? " (wrong delimiter? fields are separated by commas)" : ""));
        const double o = v[2], h = v[3], l = v[4], c = v[5];
        if (h < l) fail(name, line_no, fmt::format("high {} < low {}; expected high >= low", h, l));
        if (l > std::min(o, c))
            fail(name, line_no,
                 fmt::format("low {} is above min(open, close) = {}; expected low <= open and low <= close", l,
                             std::min(o, c)));
        if (h < std::max(o, c))
            fail(name, line_no,
                 fmt::format("high {} is below max(open, close) = {}; expected high >= open and high >= close", h,
                             std::max(o, c)));
        if (!bars.time.empty() && t <= bars.time.back())
            fail(name, line_no,
                 fmt::format("time {} is {} the previous row's {} (line {}); rows must be strictly increasing in time",
                             format_time(t), t == bars.time.back() ? "a duplicate of" : "before",
                             format_time(bars.time.back()), prev_line));
        bars.time.push_back(t);
        bars.open.push_back(o);
        bars.high.push_back(h);
        bars.low.push_back(l);
        bars.close.push_back(c);
        bars.volume.push_back(v[6]);
        prev_line = line_no;
    }
    if (bars.size() == 0)
        fail(name, 1, fmt::format("the file has a header but no data rows; expected one row per bar after it"));
    return bars;
}

std::string read_file_bytes(const std::string& path) {
    util::RegularFile f(path);
    if (!f.ok())
        throw DataError(
            fmt::format("{}: {}; data.path must name a CSV file or a directory of CSV files", path, f.error()));
    std::string out;
    if (!f.read_all(out, std::numeric_limits<std::size_t>::max() / 2))
        throw DataError(fmt::format("{}: {}", path, f.error()));
    return out;
}

BarSeries read_csv_file(const std::string& path) {
    return parse_csv_bars(read_file_bytes(path), path);
}

std::vector<std::string> list_csv_files(const std::string& dir) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), e; !ec && it != e; it.increment(ec)) {
        if (lower(it->path().extension().string()) != ".csv") continue;
        std::error_code entry;
        const bool regular = it->is_regular_file(entry);
        // A .csv entry that cannot be resolved (a symlink loop, a dangling link) is named, not
        // skipped: the directory's contract files would silently lose one.
        if (entry)
            throw DataError(fmt::format("{}: {}; a data directory holds CSV files (links that resolve to them)",
                                        it->path().string(), entry.message()));
        if (regular) files.push_back(it->path().string());
    }
    if (ec) throw DataError(fmt::format("{}: cannot list the directory: {}", dir, ec.message()));
    if (files.empty())
        throw DataError(fmt::format("{}: no *.csv files in the directory; expected one CSV file per contract", dir));
    std::sort(files.begin(), files.end());
    return files;
}

void append_segment(BarSeries& into, BarSeries&& next) {
    if (into.size() == 0) {
        into = std::move(next);
        return;
    }
    if (next.has_volume != into.has_volume)
        throw DataError(fmt::format("{}:1: {} a volume column but {} {}; expected all contract files to agree",
                                    next.segment_names.front(), next.has_volume ? "has" : "has no",
                                    into.segment_names.back(), into.has_volume ? "has one" : "has none"));
    if (next.time.front() <= into.time.back())
        throw DataError(
            fmt::format("{}:2: first bar {} is not after the last bar {} of {}; consecutive contract files must not "
                        "overlap in time: trim the roll period from one of them (docs/data.md, Contract directories)",
                        next.segment_names.front(), format_time(next.time.front()), format_time(into.time.back()),
                        into.segment_names.back()));
    const std::size_t offset = into.size();
    into.time.insert(into.time.end(), next.time.begin(), next.time.end());
    for (auto column : {&BarSeries::open, &BarSeries::high, &BarSeries::low, &BarSeries::close, &BarSeries::volume})
        (into.*column).insert((into.*column).end(), (next.*column).begin(), (next.*column).end());
    for (auto s : next.segment_starts) into.segment_starts.push_back(s + offset);
    for (auto& n : next.segment_names) into.segment_names.push_back(std::move(n));
}

BarSeries join_contracts(std::vector<BarSeries> parts) {
    std::stable_sort(parts.begin(), parts.end(),
                     [](const BarSeries& a, const BarSeries& b) { return a.time.front() < b.time.front(); });
    BarSeries out;
    for (auto& part : parts) append_segment(out, std::move(part));
    return out;
}

BarSeries read_csv_directory(const std::string& dir) {
    const auto files = list_csv_files(dir);
    std::vector<BarSeries> parts;
    parts.reserve(files.size());
    for (const auto& f : files) parts.push_back(read_csv_file(f));
    return join_contracts(std::move(parts));
}

}  // namespace fh::data
