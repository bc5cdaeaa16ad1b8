// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/csv.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include "joule/common/input_file.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule {

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

// One way to name a place and to parse a number, for tables and streams.
// A file's bytes in a message (a header's name, a field) are shown as
// printable() shows them: errors go to terminals, logs and JSON, which
// need UTF-8.
std::string place(const std::string& path, std::size_t line, const std::string& column, std::size_t index) {
  return fmt::format("{}:{}: column '{}' (column {})", path, line, printable(column), index + 1);
}

std::string missing_columns_error(const std::string& path, const std::vector<std::string>& columns,
                                  const std::unordered_map<std::string, std::size_t>& present) {
  std::string missing;
  for (const auto& column : columns) {
    if (!present.count(column)) missing += (missing.empty() ? "" : ", ") + column;
  }
  if (missing.empty()) return {};
  return fmt::format("{}:1: missing column{}: {}", path, missing.find(',') == std::string::npos ? "" : "s", missing);
}

// Traces and profiles are text: a line that is not UTF-8 is refused where
// it is, before any of its bytes can reach a name, a message or JSON.
void require_utf8(const std::string& path, std::size_t line, std::string_view text) {
  if (const auto at = first_invalid_utf8(text)) {
    throw Error(fmt::format("{}:{}: byte {} of the line (0x{:02x}) is not UTF-8", path, line, *at + 1,
                            static_cast<unsigned char>(text[*at])));
  }
}

std::optional<double> parse_finite(const std::string& value) {
  try {
    std::size_t used = 0;
    const double x = std::stod(value, &used);
    if (used == value.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

CsvTable CsvTable::read(const std::string& path) {
  std::ifstream in = open_input_file(path);
  CsvTable table;
  table.path_ = path;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    require_utf8(path, number, line);
    if (table.header_.empty()) {
      table.header_ = split(line);
      for (std::size_t i = 0; i < table.header_.size(); ++i) table.columns_[table.header_[i]] = i;
      continue;
    }
    auto fields = split(line);
    if (fields.size() != table.header_.size()) {
      throw Error(fmt::format("{}:{}: {} fields, but the header has {}", path, number, fields.size(),
                              table.header_.size()));
    }
    table.rows_.push_back(std::move(fields));
    table.lines_.push_back(number);
  }
  if (table.header_.empty()) throw Error(fmt::format("{}: empty file (no header row)", path));
  return table;
}

void CsvTable::require_columns(const std::vector<std::string>& columns) const {
  if (std::string error = missing_columns_error(path_, columns, columns_); !error.empty()) throw Error(error);
}

std::size_t CsvTable::column_index(const std::string& column) const {
  auto it = columns_.find(column);
  if (it == columns_.end()) throw Error(fmt::format("{}:1: missing column: {}", path_, column));
  return it->second;
}

std::string CsvTable::where(std::size_t line, const std::string& column) const {
  return place(path_, line, column, column_index(column));
}

const std::string& CsvTable::Row::text(const std::string& column) const {
  return table->rows_[index][table->column_index(column)];
}

double CsvTable::Row::number(const std::string& column) const {
  const std::string& value = text(column);
  if (const auto x = parse_finite(value)) return *x;
  throw Error(fmt::format("{}: '{}' is not a number", table->where(line, column), printable(value)));
}

long long CsvTable::Row::integer(const std::string& column) const {
  const double x = number(column);
  // Whole numbers a double holds exactly (2^53): beyond, the cast to long
  // long is undefined once past its range, and the value is not the text.
  constexpr double kLargest = 9007199254740992.0;
  if (x != std::floor(x)) {
    throw Error(fmt::format("{}: '{}' is not a whole number", table->where(line, column), printable(text(column))));
  }
  if (std::fabs(x) > kLargest) {
    throw Error(fmt::format("{}: '{}' is outside [-2^53, 2^53]", table->where(line, column), printable(text(column))));
  }
  return static_cast<long long>(x);
}

CsvStream::CsvStream(const std::string& path) : path_(path == "-" ? "<stdin>" : path) {
  if (path == "-") {
    in_ = &std::cin;
  } else {
    file_ = std::make_unique<std::ifstream>(open_input_file(path));
    in_ = file_.get();
  }
  while (std::getline(*in_, buffer_)) {
    ++line_;
    if (!buffer_.empty() && buffer_.back() == '\r') buffer_.pop_back();
    if (buffer_.empty()) continue;
    require_utf8(path_, line_, buffer_);
    header_ = split(buffer_);
    for (std::size_t i = 0; i < header_.size(); ++i) columns_[header_[i]] = i;
    return;
  }
  throw Error(fmt::format("{}: empty file (no header row)", path_));
}

void CsvStream::require_columns(const std::vector<std::string>& columns) const {
  if (std::string error = missing_columns_error(path_, columns, columns_); !error.empty()) throw Error(error);
}

std::size_t CsvStream::column(const std::string& name) const {
  auto it = columns_.find(name);
  if (it == columns_.end()) throw Error(fmt::format("{}:1: missing column: {}", path_, name));
  return it->second;
}

bool CsvStream::next() {
  while (std::getline(*in_, buffer_)) {
    ++line_;
    if (!buffer_.empty() && buffer_.back() == '\r') buffer_.pop_back();
    if (buffer_.empty()) continue;
    require_utf8(path_, line_, buffer_);
    // Views into buffer_, valid until the next call.
    fields_.clear();
    std::string_view rest(buffer_);
    while (true) {
      const std::size_t comma = rest.find(',');
      fields_.push_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (fields_.size() != header_.size()) {
      throw Error(fmt::format("{}:{}: {} fields, but the header has {}", path_, line_, fields_.size(), header_.size()));
    }
    return true;
  }
  if (in_->bad()) throw Error(fmt::format("{}: read error after line {}", path_, line_));
  return false;
}

double CsvStream::number(std::size_t column) const {
  const std::string value(fields_[column]);
  if (const auto x = parse_finite(value)) return *x;
  throw Error(fmt::format("{}: '{}' is not a number", where(column), printable(value)));
}

std::string CsvStream::where(std::size_t column) const { return place(path_, line_, header_[column], column); }

}  // namespace joule
