// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The input checks the service's own code shares with request parsing
// (request_input.cc; the public parsers are declared in
// joule/service/batch_size_service.h). Each refusal is a RequestError(400).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "joule/service/batch_size_service.h"

namespace joule::service::input {

[[noreturn]] void bad_request(const std::string& what);

// A GPU model or node name: at most input_limits::kMaxLabelBytes of UTF-8
// without control characters (docs/service.md, "Names"); `what` names it.
void check_label(const std::string& text, const char* what);

// Whether a result's energy and time are ones a report may carry.
bool result_energy_in_range(double energy_j);
bool result_time_in_range(double time_s);

// A power profile's entries, each number checked.
std::vector<PowerProfileEntry> profile_entries(const nlohmann::json& entries);

}  // namespace joule::service::input
