// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/power_limit_facts.h"

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

}  // namespace joule
