// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What a client sends the batch-size service, read and checked before the
// service acts on it: the request body, job specs, results, progress and
// power profiles, each number's range and finiteness, each name's bytes.
#include "service/request_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "joule/common/utf8.h"

namespace joule::service {
namespace input {

void bad_request(const std::string& what) { throw RequestError(400, what); }

// A GPU model or node name: stored, listed, exported and logged, so held to
// what every one of those can carry (docs/service.md, "Names"): at most
// input_limits::kMaxLabelBytes of UTF-8 without control characters.
void check_label(const std::string& text, const char* what) {
  if (text.size() > input_limits::kMaxLabelBytes) {
    bad_request(fmt::format("{} is {} bytes long; at most {} are taken", what, text.size(), input_limits::kMaxLabelBytes));
  }
  if (const auto at = first_invalid_utf8(text)) bad_request(fmt::format("{} holds invalid UTF-8 at byte {}", what, *at));
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C0 controls and DEL; C1 controls are U+0080-U+009F, encoded C2 80-9F.
    const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      bad_request(fmt::format("{} holds a control character at byte {} ('{}')", what, i, printable(text)));
    }
  }
}

}  // namespace input

namespace {

using input::bad_request;
using input::check_label;
namespace limits = input_limits;

constexpr std::size_t kMaxNameLength = 200;
constexpr std::size_t kMaxBatchSizes = 256;

template <typename T>
T field(const nlohmann::json& j, const char* name, const char* what) {
  if (!j.contains(name)) bad_request(fmt::format("{}: '{}' is missing", what, name));
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    bad_request(fmt::format("{}: '{}' has the wrong type ({})", what, name, j.at(name).type_name()));
  }
}

template <typename T>
T field_or(const nlohmann::json& j, const char* name, const char* what, T fallback) {
  return j.contains(name) && !j.at(name).is_null() ? field<T>(j, name, what) : fallback;
}

// A number's allowed range, as errors name it: "[0, 1e+15]", "(0, 1e+09]".
struct Range {
  double min, max;
  bool min_open = false;  // min itself is out
  std::string text() const { return fmt::format("{}{:g}, {:g}]", min_open ? '(' : '[', min, max); }
  bool holds(double v) const { return std::isfinite(v) && (min_open ? v > min : v >= min) && v <= max; }
};

void check_in(double v, const Range& range, const char* name, const char* what) {
  if (!range.holds(v)) bad_request(fmt::format("{}: '{}' is {}; it must be a number in {}", what, name, v, range.text()));
}

// A number field, checked for finiteness and range before anything uses it.
double number_in(const nlohmann::json& j, const char* name, const char* what, const Range& range) {
  if (!j.contains(name)) bad_request(fmt::format("{}: '{}' is missing", what, name));
  const nlohmann::json& v = j.at(name);
  if (!v.is_number()) bad_request(fmt::format("{}: '{}' has the wrong type ({})", what, name, v.type_name()));
  check_in(v.get<double>(), range, name, what);
  return v.get<double>();
}

// A whole-number field in [min, max], checked before narrowing: JSON
// numbers past int64 (unsigned ones, 1e10 written as a float) would
// otherwise wrap or be undefined when converted.
int64_t whole_number_in(const nlohmann::json& v, const std::string& name, const char* what, int64_t min, int64_t max) {
  const auto refuse = [&] {
    bad_request(fmt::format("{}: '{}' is {}; it must be a whole number in [{}, {}]", what, name, v.dump(), min, max));
  };
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(max)) refuse();
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < min || v.get<int64_t>() > max) refuse();
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // (max as a double may round up to 2^63, which no int64 holds.)
    if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max) && d < 0x1p63) || d != std::floor(d)) refuse();
    return static_cast<int64_t>(d);
  }
  bad_request(fmt::format("{}: '{}' has the wrong type ({})", what, name, v.type_name()));
}

int64_t whole_field_in(const nlohmann::json& j, const char* name, const char* what, int64_t min, int64_t max) {
  if (!j.contains(name)) bad_request(fmt::format("{}: '{}' is missing", what, name));
  return whole_number_in(j.at(name), name, what, min, max);
}

const Range kEnergyJ{0, limits::kMaxEnergyJ};
const Range kResultTimeS{0, limits::kMaxTimeS, true};  // a run that reported took some time
const Range kProgressTimeS{0, limits::kMaxTimeS};      // progress may come before any
const Range kPowerW{0, limits::kMaxPowerW, true};
const Range kAvgPowerW{0, limits::kMaxPowerW};

// The range of a request field named `name`, for errors about numbers the
// JSON parser refused ("" when the name is not a number field).
std::string range_of_field(const std::string& name) {
  static const std::map<std::string, std::string> ranges = {
      {"energy_j", kEnergyJ.text()},
      {"time_s", kResultTimeS.text() + " (progress: " + kProgressTimeS.text() + ")"},
      {"epochs", fmt::format("[0, {}]", limits::kMaxEpochs)},
      {"max_epochs", fmt::format("[0, {}]", limits::kMaxEpochs)},
      {"max_power_w", kPowerW.text()},
      {"power_limit_w", kPowerW.text()},
      {"avg_power_w", kAvgPowerW.text()},
      {"time_per_epoch_s", kResultTimeS.text()},
      {"eta", "[0, 1]"},
      {"beta", fmt::format("(1, {}]", limits::kMaxBeta)},
      {"window", fmt::format("[1, {}]", limits::kMaxWindow)},
      {"gpu_count", fmt::format("[1, {}]", limits::kMaxGpuCount)},
      {"batch_sizes", fmt::format("[1, {}]", limits::kMaxBatchSize)},
      {"default_batch_size", fmt::format("[1, {}]", limits::kMaxBatchSize)},
      {"seed", "[0, 18446744073709551615]"},
  };
  const auto it = ranges.find(name);
  return it == ranges.end() ? "" : it->second;
}

}  // namespace

namespace input {

bool result_energy_in_range(double energy_j) { return kEnergyJ.holds(energy_j); }

bool result_time_in_range(double time_s) { return kResultTimeS.holds(time_s); }

std::vector<PowerProfileEntry> profile_entries(const nlohmann::json& entries) {
  if (!entries.is_array() || entries.empty() || entries.size() > limits::kMaxProfileEntries) {
    bad_request(fmt::format("power profile: 'entries' must be an array of 1-{} entries", limits::kMaxProfileEntries));
  }
  std::vector<PowerProfileEntry> out;
  for (const auto& e : entries) {
    constexpr const char* kWhat = "power profile entry";
    if (!e.is_object()) bad_request("power profile: every entry must be an object");
    out.push_back({number_in(e, "power_limit_w", kWhat, kPowerW), number_in(e, "time_per_epoch_s", kWhat, kResultTimeS),
                   number_in(e, "avg_power_w", kWhat, kAvgPowerW)});
  }
  return out;
}

}  // namespace input

nlohmann::json power_profile_json(const std::vector<PowerProfileEntry>& entries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : entries) {
    out.push_back({{"power_limit_w", e.power_limit_w},
                   {"time_per_epoch_s", e.time_per_epoch_s},
                   {"avg_power_w", e.avg_power_w}});
  }
  return out;
}

nlohmann::json parse_request_body(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  // JSON is UTF-8; the parser's own message would echo the bytes.
  if (const auto at = first_invalid_utf8(body)) {
    throw RequestError(400, fmt::format("the request body holds invalid UTF-8 at byte {}; nothing was changed", *at));
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::out_of_range& e) {
    // Only a number too large for a double gets here (406). Parse again,
    // noting each key, to name the field it was given for.
    std::string key;
    const auto note_key = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key) key = parsed.get<std::string>();
      return true;
    };
    try {
      [[maybe_unused]] const nlohmann::json partial = nlohmann::json::parse(body, note_key);
    } catch (const nlohmann::json::exception&) {
    }
    const std::string range = range_of_field(key);
    throw RequestError(400, fmt::format("the request body: {} is beyond any number this service takes{} ({})",
                                        key.empty() ? "a number" : "'" + printable(key) + "'",
                                        range.empty() ? "" : "; it must be a number in " + range, printable(e.what())));
  } catch (const nlohmann::json::exception& e) {
    throw RequestError(400, fmt::format("the request body is not valid JSON ({})", printable(e.what())));
  }
}

JobSpec JobSpec::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "job spec";
  if (!j.is_object()) bad_request("job spec: expected a JSON object");
  JobSpec s;
  s.name = field<std::string>(j, "name", kWhat);
  if (s.name.empty() || s.name.size() > kMaxNameLength ||
      !std::all_of(s.name.begin(), s.name.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; })) {
    bad_request(fmt::format("job spec: name must be 1-{} letters, digits, '-', '_' or '.'", kMaxNameLength));
  }
  if (!j.contains("batch_sizes") || !j.at("batch_sizes").is_array()) bad_request("job spec: 'batch_sizes' must be an array");
  const nlohmann::json& sizes = j.at("batch_sizes");
  if (sizes.empty() || sizes.size() > kMaxBatchSizes) {
    bad_request(fmt::format("job spec: batch_sizes must list 1-{} sizes", kMaxBatchSizes));
  }
  for (const nlohmann::json& b : sizes) {
    s.batch_sizes.push_back(static_cast<int>(whole_number_in(b, "batch_sizes", kWhat, 1, limits::kMaxBatchSize)));
  }
  if (!std::is_sorted(s.batch_sizes.begin(), s.batch_sizes.end()) ||
      std::adjacent_find(s.batch_sizes.begin(), s.batch_sizes.end()) != s.batch_sizes.end()) {
    bad_request("job spec: batch_sizes must be positive, distinct and increasing");
  }
  s.default_batch_size = static_cast<int>(whole_field_in(j, "default_batch_size", kWhat, 1, limits::kMaxBatchSize));
  if (!std::binary_search(s.batch_sizes.begin(), s.batch_sizes.end(), s.default_batch_size)) {
    bad_request(fmt::format("job spec: default_batch_size {} is not among batch_sizes", s.default_batch_size));
  }
  const auto given = [&](const char* name) { return j.contains(name) && !j.at(name).is_null(); };
  if (given("eta")) s.eta = number_in(j, "eta", kWhat, {0, 1});
  if (given("beta")) s.beta = number_in(j, "beta", kWhat, {1, limits::kMaxBeta, true});
  s.target_metric = field_or<std::string>(j, "target_metric", kWhat, "");
  if (given("max_epochs")) s.max_epochs = static_cast<int>(whole_field_in(j, "max_epochs", kWhat, 0, limits::kMaxEpochs));
  if (given("window")) s.window = static_cast<std::size_t>(whole_field_in(j, "window", kWhat, 1, limits::kMaxWindow));
  s.gpu_model = field_or<std::string>(j, "gpu_model", kWhat, "");
  check_label(s.gpu_model, "job spec: 'gpu_model'");
  if (given("gpu_count")) s.gpu_count = static_cast<int>(whole_field_in(j, "gpu_count", kWhat, 1, limits::kMaxGpuCount));
  s.max_power_w = number_in(j, "max_power_w", kWhat, kPowerW);
  if (given("seed")) {
    // Any 64-bit seed: whole_number_in stops at int64's largest.
    const nlohmann::json& seed = j.at("seed");
    if (seed.is_number_unsigned()) {
      s.seed = seed.get<uint64_t>();
    } else {
      s.seed = static_cast<uint64_t>(whole_number_in(seed, "seed", kWhat, 0, std::numeric_limits<int64_t>::max()));
    }
  }
  return s;
}

nlohmann::json JobSpec::to_json() const {
  return {{"name", name},
          {"batch_sizes", batch_sizes},
          {"default_batch_size", default_batch_size},
          {"eta", eta},
          {"beta", beta},
          {"target_metric", target_metric},
          {"max_epochs", max_epochs},
          {"window", window ? nlohmann::json(*window) : nlohmann::json()},
          {"gpu_model", gpu_model},
          {"gpu_count", gpu_count},
          {"max_power_w", max_power_w},
          {"seed", seed}};
}

RecurrenceResult RecurrenceResult::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "result";
  if (!j.is_object()) bad_request("result: expected a JSON object");
  RecurrenceResult r;
  r.energy_j = number_in(j, "energy_j", kWhat, kEnergyJ);
  r.time_s = number_in(j, "time_s", kWhat, kResultTimeS);
  r.reached_target = field<bool>(j, "reached_target", kWhat);
  r.stopped_early = field_or<bool>(j, "stopped_early", kWhat, false);
  r.check();
  return r;
}

void RecurrenceResult::check() const {
  check_in(energy_j, kEnergyJ, "energy_j", "result");
  check_in(time_s, kResultTimeS, "time_s", "result");
  if (stopped_early && reached_target) bad_request("result: a run stopped early did not reach the target");
}

RecurrenceProgress RecurrenceProgress::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "progress";
  if (!j.is_object()) bad_request("progress: expected a JSON object");
  RecurrenceProgress p;
  p.epochs = static_cast<int>(whole_field_in(j, "epochs", kWhat, 0, limits::kMaxEpochs));
  p.energy_j = number_in(j, "energy_j", kWhat, kEnergyJ);
  p.time_s = number_in(j, "time_s", kWhat, kProgressTimeS);
  return p;
}

void RecurrenceProgress::check() const {
  if (epochs < 0 || epochs > limits::kMaxEpochs) {
    bad_request(fmt::format("progress: 'epochs' is {}; it must be a whole number in [0, {}]", epochs, limits::kMaxEpochs));
  }
  check_in(energy_j, kEnergyJ, "energy_j", "progress");
  check_in(time_s, kProgressTimeS, "time_s", "progress");
}

}  // namespace joule::service
