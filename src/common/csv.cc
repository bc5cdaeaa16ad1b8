#include "joule/common/csv.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

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

}  // namespace

CsvTable CsvTable::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  CsvTable table;
  table.path_ = path;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
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
  std::string missing;
  for (const auto& column : columns) {
    if (!columns_.count(column)) missing += (missing.empty() ? "" : ", ") + column;
  }
  if (!missing.empty()) {
    throw Error(fmt::format("{}:1: missing column{}: {}", path_, missing.find(',') == std::string::npos ? "" : "s",
                            missing));
  }
}

std::size_t CsvTable::column_index(const std::string& column) const {
  auto it = columns_.find(column);
  if (it == columns_.end()) throw Error(fmt::format("{}:1: missing column: {}", path_, column));
  return it->second;
}

std::string CsvTable::where(std::size_t line, const std::string& column) const {
  return fmt::format("{}:{}: column '{}' (column {})", path_, line, column, column_index(column) + 1);
}

const std::string& CsvTable::Row::text(const std::string& column) const {
  return table->rows_[index][table->column_index(column)];
}

double CsvTable::Row::number(const std::string& column) const {
  const std::string& value = text(column);
  try {
    std::size_t used = 0;
    const double x = std::stod(value, &used);
    if (used == value.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("{}: '{}' is not a number", table->where(line, column), value));
}

long long CsvTable::Row::integer(const std::string& column) const {
  const double x = number(column);
  if (x != std::floor(x)) {
    throw Error(fmt::format("{}: '{}' is not a whole number", table->where(line, column), text(column)));
  }
  return static_cast<long long>(x);
}

}  // namespace joule
