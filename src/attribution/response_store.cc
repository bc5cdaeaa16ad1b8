// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/response_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "joule/common/input_file.h"
#include "joule/common/output_file.h"
#include "joule/error.h"

namespace joule::attribution {

namespace {

constexpr const char* kFormat = "joule sample response 1";
constexpr std::size_t kMaxLags = 1000;     // a response over a second: no GPU's
constexpr std::size_t kMaxRounds = 10000;  // bootstrap refits
constexpr int kMaxLagMs = 1000;

// A file name's part from text a driver gave: lower-case letters, digits and
// dots kept, every other run of bytes one '-'.
std::string file_part(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && (std::isalnum(u) || c == '.')) {
      out += static_cast<char>(std::tolower(u));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unnamed" : out;
}

// Refused with the file and the field.
[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw UsageError(fmt::format("sample response {}: {}", where, what));
}

void check_weights(const std::vector<double>& weights, const std::string& where, const std::string& field) {
  if (weights.empty() || weights.size() > kMaxLags) {
    refuse(where, fmt::format("'{}' must hold 1 to {} weights, not {}", field, kMaxLags, weights.size()));
  }
  double sum = 0.0;
  for (const double w : weights) {
    if (!std::isfinite(w) || std::abs(w) > 1.0) refuse(where, fmt::format("'{}' holds {}, not a weight", field, w));
    sum += w;
  }
  if (std::abs(sum - 1.0) > 0.01) refuse(where, fmt::format("'{}' sums to {:.4f}, not 1", field, sum));
}

void check_lag(int lag_ms, const std::string& where, const std::string& field) {
  if (std::abs(lag_ms) > kMaxLagMs) {
    refuse(where, fmt::format("'{}' is {} ms, beyond +-{} ms", field, lag_ms, kMaxLagMs));
  }
}

void check(const SampleResponse& r, const std::string& where) {
  check_weights(r.response_ms, where, "response_ms");
  check_lag(r.first_lag_ms, where, "first_lag_ms");
  if (r.rounds.size() > kMaxRounds) {
    refuse(where, fmt::format("'rounds' holds {} refits, over {}", r.rounds.size(), kMaxRounds));
  }
  for (const auto& round : r.rounds) check_weights(round, where, "rounds");
  check_lag(r.rounds_first_lag_ms, where, "rounds_first_lag_ms");
  const std::pair<const char*, double> figures[] = {{"low_w", r.low_w},       {"high_w", r.high_w},
                                                     {"residual_rms_w", r.residual_rms_w},
                                                     {"lag10_ms", r.lag10_ms}, {"lag50_ms", r.lag50_ms},
                                                     {"lag90_ms", r.lag90_ms}, {"smoothing", r.smoothing}};
  for (const auto& [field, value] : figures) {
    if (!std::isfinite(value) || std::abs(value) > 1e6) refuse(where, fmt::format("'{}' is {}", field, value));
  }
}

template <typename T>
T field(const nlohmann::json& j, const char* name, const std::string& where) {
  if (!j.contains(name)) refuse(where, fmt::format("'{}' is missing", name));
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    refuse(where, fmt::format("'{}' is not {}", name, std::is_same_v<T, std::string> ? "text" : "a number or list"));
  }
}

}  // namespace

std::filesystem::path SampleResponseStore::default_dir() {
  if (const char* dir = std::getenv("JOULE_SAMPLE_RESPONSE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache == '/') {
    return std::filesystem::path(cache) / "joule" / "sample-response";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".cache" / "joule" / "sample-response";
}

std::filesystem::path SampleResponseStore::path_for(const GpuModel& gpu) const {
  return dir_ / (file_part(gpu.name) + "--" + file_part(gpu.driver_version) + ".json");
}

void SampleResponseStore::save(const GpuModel& gpu, const SampleResponse& response,
                               const std::string& measured_at) const {
  const std::filesystem::path path = path_for(gpu);
  check(response, "to store for " + gpu.name);
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    throw Error(fmt::format("cannot make the sample response directory '{}': {}", dir_.string(), error.message()));
  }
  const nlohmann::json j = {{"format", kFormat},
                            {"gpu_name", gpu.name},
                            {"driver_version", gpu.driver_version},
                            {"measured_at", measured_at},
                            {"response_ms", response.response_ms},
                            {"first_lag_ms", response.first_lag_ms},
                            {"rounds", response.rounds},
                            {"rounds_first_lag_ms", response.rounds_first_lag_ms},
                            {"low_w", response.low_w},
                            {"high_w", response.high_w},
                            {"residual_rms_w", response.residual_rms_w},
                            {"samples", response.samples},
                            {"lag10_ms", response.lag10_ms},
                            {"lag50_ms", response.lag50_ms},
                            {"lag90_ms", response.lag90_ms},
                            {"smoothing", response.smoothing}};
  OutputFile out(path.string());
  // Text a driver gave may hold any byte: replaced where it is not UTF-8.
  out.stream() << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.commit();
}

std::optional<SampleResponse> SampleResponseStore::load(const GpuModel& gpu) const {
  const std::filesystem::path path = path_for(gpu);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  const std::string where = "file '" + path.string() + "'";
  std::stringstream text;
  text << open_input_file(path.string(), "sample response").rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    refuse(where, fmt::format("not JSON ({})", e.what()));
  }
  if (!j.is_object() || field<std::string>(j, "format", where) != kFormat) {
    refuse(where, fmt::format("not a joule sample response (format '{}')", kFormat));
  }
  if (field<std::string>(j, "gpu_name", where) != gpu.name ||
      field<std::string>(j, "driver_version", where) != gpu.driver_version) {
    refuse(where, fmt::format("holds another GPU's response, not {} with driver {}", gpu.name, gpu.driver_version));
  }
  SampleResponse r;
  r.response_ms = field<std::vector<double>>(j, "response_ms", where);
  r.first_lag_ms = field<int>(j, "first_lag_ms", where);
  r.rounds = field<std::vector<std::vector<double>>>(j, "rounds", where);
  r.rounds_first_lag_ms = field<int>(j, "rounds_first_lag_ms", where);
  r.low_w = field<double>(j, "low_w", where);
  r.high_w = field<double>(j, "high_w", where);
  r.residual_rms_w = field<double>(j, "residual_rms_w", where);
  r.samples = field<std::size_t>(j, "samples", where);
  r.lag10_ms = field<double>(j, "lag10_ms", where);
  r.lag50_ms = field<double>(j, "lag50_ms", where);
  r.lag90_ms = field<double>(j, "lag90_ms", where);
  r.smoothing = field<double>(j, "smoothing", where);
  check(r, where);
  r.source = fmt::format("stored for {}, driver {}, measured {} ({})", gpu.name, gpu.driver_version,
                         field<std::string>(j, "measured_at", where), path.string());
  return r;
}

std::vector<std::string> SampleResponseStore::drivers_for(const std::string& gpu_name) const {
  std::vector<std::string> drivers;
  const std::string prefix = file_part(gpu_name) + "--";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0 || entry.path().extension() != ".json") continue;
    drivers.push_back(file.substr(prefix.size(), file.size() - prefix.size() - 5));
  }
  std::sort(drivers.begin(), drivers.end());
  return drivers;
}

}  // namespace joule::attribution
