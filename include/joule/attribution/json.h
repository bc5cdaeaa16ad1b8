// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// An Attribution as JSON, for the C interface and files: every field, the
// regions in the order of their names; numbers that are not finite (no
// estimate, no interval) are null.
#pragma once

#include <nlohmann/json.hpp>

#include "joule/attribution/attribution.h"

namespace joule::attribution {

nlohmann::json to_json(const Attribution& attribution);

}  // namespace joule::attribution
