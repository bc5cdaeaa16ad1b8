// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A small CSV reader for the traces and profiles joule consumes: header row,
// comma-separated fields without quoting. Every error names the file, the
// line and the column.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace joule {

class CsvTable {
 public:
  // Reads path; throws Error naming the file when it cannot be read, and
  // naming the line when a row has the wrong number of fields.
  static CsvTable read(const std::string& path);
  // Throws Error naming every missing column.
  void require_columns(const std::vector<std::string>& columns) const;
  bool has_column(const std::string& column) const { return columns_.count(column) > 0; }

  struct Row {
    const CsvTable* table;
    std::size_t index;  // into rows
    std::size_t line;   // 1-based line in the file
    const std::string& text(const std::string& column) const;
    double number(const std::string& column) const;        // finite
    long long integer(const std::string& column) const;    // whole number
  };

  std::size_t size() const { return rows_.size(); }
  Row row(std::size_t i) const { return {this, i, lines_[i]}; }
  const std::string& path() const { return path_; }
  // "file:line: column 'name' (column N): message".
  std::string where(std::size_t line, const std::string& column) const;

 private:
  std::size_t column_index(const std::string& column) const;

  std::string path_;
  std::vector<std::string> header_;
  std::unordered_map<std::string, std::size_t> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::size_t> lines_;
};

// The same format read one row at a time, for traces too large to hold: memory
// stays one line. Errors read like CsvTable's. Path "-" reads stdin (named
// "<stdin>" in errors).
class CsvStream {
 public:
  // Opens path and reads the header; throws Error when it cannot be read or
  // has no header row.
  explicit CsvStream(const std::string& path);

  void require_columns(const std::vector<std::string>& columns) const;
  bool has_column(const std::string& column) const { return columns_.count(column) > 0; }
  // The column's index, for the accessors below; throws Error when missing.
  std::size_t column(const std::string& name) const;

  // Moves to the next non-empty row; false at the end of the input. Throws
  // Error for a row with the wrong number of fields.
  bool next();
  std::size_t line() const { return line_; }  // 1-based, of the current row
  std::string_view text(std::size_t column) const { return fields_[column]; }
  double number(std::size_t column) const;  // finite
  // "file:line: column 'name' (column N)" for the current row.
  std::string where(std::size_t column) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<std::ifstream> file_;  // null: stdin
  std::istream* in_ = nullptr;
  std::vector<std::string> header_;
  std::unordered_map<std::string, std::size_t> columns_;
  std::string buffer_;
  std::vector<std::string_view> fields_;
  std::size_t line_ = 0;
};

}  // namespace joule
