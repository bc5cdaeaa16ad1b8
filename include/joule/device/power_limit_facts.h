// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A GPU's power-limit facts as every report shows them (joule info, jouled's
// state, the Python module's devices): the limit in force, the default and
// the range, in watts, each read on its own so that one the driver refuses
// leaves the others, and the refusals said the same way everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "joule/device/gpu.h"

namespace joule {

struct PowerLimitFacts {
  std::optional<double> limit_w, default_w, min_w, max_w;  // none: the driver refused it
  // One per refused reading, in the order above: "limit: <driver's message>".
  std::vector<std::string> errors;

  // The errors in one line ("" when none), for a report's error field.
  std::string error_text() const;
};

// Reads each fact; a DeviceError becomes an entry of `errors`, anything else
// propagates.
PowerLimitFacts read_power_limit_facts(Gpu& gpu);

// The facts as a GPU's JSON object carries them (joule info --json, jouled's
// state): power_limit_w, default_limit_w, min_limit_w, max_limit_w (null
// where refused) and power_limit_error (null, or the refusals in one line,
// made valid UTF-8).
void add_power_limit_fields(nlohmann::json& gpu, const PowerLimitFacts& facts);

}  // namespace joule
