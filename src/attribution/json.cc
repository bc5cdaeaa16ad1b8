// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/json.h"

#include <cmath>

namespace joule::attribution {

namespace {

nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json region_json(const RegionEnergy& r) {
  return {{"name", r.name},
          {"concurrent", r.concurrent},
          {"calls", r.calls},
          {"gpu_time_s", number(r.gpu_time_s)},
          {"resolved", r.resolved},
          {"power_w", number(r.power_w)},
          {"power_above_baseline_w", number(r.power_above_baseline_w)},
          {"energy_j", number(r.energy_j)},
          {"energy_per_call_j", number(r.energy_per_call_j)},
          {"share", number(r.share)},
          {"energy_low_j", number(r.energy_low_j)},
          {"energy_high_j", number(r.energy_high_j)},
          {"energy_std_j", number(r.energy_std_j)}};
}

}  // namespace

nlohmann::json to_json(const Attribution& a) {
  nlohmann::json regions = nlohmann::json::array();
  for (const RegionEnergy& r : a.regions) regions.push_back(region_json(r));
  nlohmann::json totals = nlohmann::json::array();
  for (const RegionEnergy& r : a.totals) totals.push_back(region_json(r));
  return {{"regions", regions},
          {"totals", totals},
          {"baseline_w", number(a.baseline_w)},
          {"baseline_low_w", number(a.baseline_low_w)},
          {"baseline_high_w", number(a.baseline_high_w)},
          {"baseline_estimated", a.baseline_estimated},
          {"baseline_separated", a.baseline_separated},
          {"idle_time_s", number(a.idle_time_s)},
          {"idle_energy_j", number(a.idle_energy_j)},
          {"window_energy_j", number(a.window_energy_j)},
          {"model_energy_j", number(a.model_energy_j)},
          {"scale", number(a.scale)},
          {"observations", a.observations},
          {"residual_rms_w", number(a.residual_rms_w)},
          {"power_ceiling_w", number(a.power_ceiling_w)},
          {"power_capped_share", number(a.power_capped_share)},
          {"notes", a.notes},
          {"simulated", a.simulated}};
}

}  // namespace joule::attribution
