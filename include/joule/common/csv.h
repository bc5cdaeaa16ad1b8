// A small CSV reader for the traces and profiles joule consumes: header row,
// comma-separated fields without quoting. Every error names the file, the
// line and the column.
#pragma once

#include <string>
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

}  // namespace joule
