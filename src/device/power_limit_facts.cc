// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/power_limit_facts.h"

#include <nlohmann/json.hpp>

#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule {

std::string PowerLimitFacts::error_text() const {
  std::string text;
  for (const std::string& e : errors) text += (text.empty() ? "" : "; ") + e;
  return text;
}

PowerLimitFacts read_power_limit_facts(Gpu& gpu) {
  PowerLimitFacts facts;
  auto read = [&](const char* what, auto fact) {
    try {
      fact();
    } catch (const DeviceError& e) {
      facts.errors.push_back(std::string(what) + ": " + e.what());
    }
  };
  read("limit", [&] { facts.limit_w = gpu.power_limit_mw() / 1000.0; });
  read("default", [&] { facts.default_w = gpu.default_power_limit_mw() / 1000.0; });
  read("range", [&] {
    const PowerLimitRange range = gpu.power_limit_range_mw();
    facts.min_w = range.min_mw / 1000.0;
    facts.max_w = range.max_mw / 1000.0;
  });
  return facts;
}

void add_power_limit_fields(nlohmann::json& gpu, const PowerLimitFacts& facts) {
  auto watts = [](const std::optional<double>& w) { return w ? nlohmann::json(*w) : nlohmann::json(); };
  gpu["power_limit_w"] = watts(facts.limit_w);
  gpu["default_limit_w"] = watts(facts.default_w);
  gpu["min_limit_w"] = watts(facts.min_w);
  gpu["max_limit_w"] = watts(facts.max_w);
  gpu["power_limit_error"] =
      facts.errors.empty() ? nlohmann::json() : nlohmann::json(valid_utf8_or_printable(facts.error_text()));
}

}  // namespace joule
