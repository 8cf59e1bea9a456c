/// @file csv_bars.hpp
/// @brief Strict CSV bar reader (docs/data.md "CSV format"): one file -> one segment, a
///        directory of contract files -> one segment per file. Every bad row is a DataError
///        "<file>:<line>: <what is wrong, what was expected>"; nothing is dropped or repaired.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/market_data.hpp"

namespace fh::data {

/// Parses one time field: Unix seconds (digits only), YYYY-MM-DD, or
/// YYYY-MM-DD[T| ]HH:MM[:SS[.fff]][Z|+HH:MM|-HH:MM|+HHMM|-HHMM]. Returns Unix seconds UTC
/// (fractions of a second are truncated), or nullopt with *why set.
std::optional<std::int64_t> parse_time(std::string_view field, std::string* why);

/// ISO-8601 UTC text of a Unix time: "YYYY-MM-DDTHH:MM:SSZ".
std::string format_time(std::int64_t unix_seconds);

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept;

/// Parses CSV text (the whole file) into one segment named `name` (used in error messages).
/// Accepts a UTF-8 BOM and CRLF line ends.
BarSeries parse_csv_bars(std::string_view text, const std::string& name);

/// Reads and parses one CSV file.
BarSeries read_csv_file(const std::string& path);

/// The *.csv files of a directory (case-insensitive extension), sorted by name (DataError when
/// there is none).
std::vector<std::string> list_csv_files(const std::string& dir);

/// Appends `next` as a new segment of `into`. `next` must start strictly after `into` ends
/// (consecutive contracts do not overlap: docs/data.md "Contract directories").
void append_segment(BarSeries& into, BarSeries&& next);

/// Joins contract files (each one segment) ordered by their first bar (append_segment rules).
BarSeries join_contracts(std::vector<BarSeries> parts);

/// Reads every *.csv file of a directory as consecutive contracts, ordered by first timestamp.
BarSeries read_csv_directory(const std::string& dir);

/// Reads a whole file into memory (DataError naming the file when it cannot).
std::string read_file_bytes(const std::string& path);

}  // namespace fh::data
