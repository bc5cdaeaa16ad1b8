// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/carbon/emissions_csv.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>

#include "joule/error.h"

namespace joule::carbon {

namespace {

// An open file descriptor closed on every exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string quoted(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// The header's column names (CodeCarbon's are plain words: no quoting to undo
// beyond a pair of quotes around a name, and a byte-order mark at the start).
std::vector<std::string> split_header(std::string line) {
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> names;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    std::string name = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

// The file's header, empty when the file is empty; checks it and that the
// file ends with a newline.
std::vector<std::string> read_checked_header(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(fmt::format("--emissions-csv {}: {}", path, std::strerror(errno)));
  if (st.st_size == 0) return {};
  std::string head;
  char buffer[4096];
  off_t offset = 0;
  while (head.find('\n') == std::string::npos && offset < st.st_size) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n < 0) throw UsageError(fmt::format("--emissions-csv {}: {}", path, std::strerror(errno)));
    if (n == 0) break;
    head.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
  const std::size_t newline = head.find('\n');
  const std::vector<std::string> header = split_header(head.substr(0, newline));
  const auto& expected = codecarbon_columns();
  const std::set<std::string> have(header.begin(), header.end()), want(expected.begin(), expected.end());
  if (have != want || header.size() != expected.size()) {
    std::vector<std::string> missing, extra;
    for (const auto& c : want) {
      if (!have.count(c)) missing.push_back(c);
    }
    for (const auto& c : have) {
      if (!want.count(c)) extra.push_back(c);
    }
    throw UsageError(fmt::format(
        "--emissions-csv {}: its header is not CodeCarbon's emissions.csv columns (missing: {}; not CodeCarbon's: "
        "{}); not touched: give a new file",
        path, missing.empty() ? std::string("none") : fmt::format("{}", fmt::join(missing, " ")),
        extra.empty() ? std::string("none (a column twice)") : fmt::format("{}", fmt::join(extra, " "))));
  }
  char last = 0;
  if (::pread(fd, &last, 1, st.st_size - 1) != 1 || last != '\n') {
    throw UsageError(fmt::format("--emissions-csv {}: its last line is unfinished (no newline at the end); not "
                                 "touched",
                                 path));
  }
  return header;
}

void write_all(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("--emissions-csv {}: write failed: {}", path, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

const std::vector<std::string>& codecarbon_columns() {
  static const std::vector<std::string> columns = {
      "timestamp",        "project_name",       "run_id",          "experiment_id",           "duration",
      "emissions",        "emissions_rate",     "cpu_power",       "gpu_power",               "ram_power",
      "cpu_energy",       "gpu_energy",         "ram_energy",      "energy_consumed",         "water_consumed",
      "country_name",     "country_iso_code",   "region",          "cloud_provider",          "cloud_region",
      "os",               "python_version",     "codecarbon_version", "cpu_count",            "cpu_model",
      "gpu_count",        "gpu_model",          "longitude",       "latitude",                "ram_total_size",
      "tracking_mode",    "cpu_utilization_percent", "gpu_utilization_percent", "ram_utilization_percent",
      "ram_used_gb",      "on_cloud",           "pue",             "wue"};
  return columns;
}

void check_emissions_csv(const std::string& path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ENOENT) {
      // It will be created: its directory must take it.
      Fd probe{::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
      if (probe.fd < 0) throw UsageError(fmt::format("--emissions-csv {}: cannot create: {}", path, std::strerror(errno)));
      ::unlink(path.c_str());
      return;
    }
    throw UsageError(fmt::format("--emissions-csv {}: cannot open: {}", path, std::strerror(errno)));
  }
  read_checked_header(file.fd, path);
  if (::access(path.c_str(), W_OK) != 0) {
    throw UsageError(fmt::format("--emissions-csv {}: not writable: {}", path, std::strerror(errno)));
  }
}

void append_emissions_csv(const std::string& path, const std::map<std::string, std::string>& values) {
  const auto& columns = codecarbon_columns();
  for (const auto& [name, value] : values) {
    if (std::find(columns.begin(), columns.end(), name) == columns.end()) {
      throw std::logic_error("append_emissions_csv: '" + name + "' is not a CodeCarbon column");
    }
  }
  Fd file{::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (file.fd < 0) throw UsageError(fmt::format("--emissions-csv {}: cannot open: {}", path, std::strerror(errno)));
  while (::flock(file.fd, LOCK_EX) != 0) {
    if (errno != EINTR) throw Error(fmt::format("--emissions-csv {}: cannot lock: {}", path, std::strerror(errno)));
  }
  std::vector<std::string> header = read_checked_header(file.fd, path);
  std::string text;
  if (header.empty()) {
    header = columns;
    text = fmt::format("{}\n", fmt::join(columns, ","));
  }
  std::vector<std::string> fields;
  for (const auto& name : header) {
    const auto it = values.find(name);
    fields.push_back(it == values.end() ? "" : quoted(it->second));
  }
  text += fmt::format("{}\n", fmt::join(fields, ","));
  write_all(file.fd, text, path);  // one write in the common case; the lock keeps other joules out meanwhile
  if (::fsync(file.fd) != 0) throw Error(fmt::format("--emissions-csv {}: {}", path, std::strerror(errno)));
}

}  // namespace joule::carbon
