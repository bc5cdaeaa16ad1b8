#include "joule/optimize/cost.h"

#include <fmt/format.h>

#include "joule/error.h"

namespace joule {

void check_eta(double eta) {
  if (!(eta >= 0.0 && eta <= 1.0)) throw UsageError(fmt::format("eta {} is outside [0, 1]", eta));
}

double zeus_cost(double energy_j, double time_s, double eta, double max_power_w) {
  return eta * energy_j + (1.0 - eta) * max_power_w * time_s;
}

PowerChoice optimal_power_limit(const std::vector<PowerProfileEntry>& profile, double eta, double max_power_w) {
  if (profile.empty()) throw UsageError("optimal_power_limit: empty power profile");
  PowerChoice best;
  bool first = true;
  for (const auto& entry : profile) {
    const double cost = zeus_cost(entry.avg_power_w * entry.time_per_epoch_s, entry.time_per_epoch_s, eta, max_power_w);
    if (first || cost < best.epoch_cost || (cost == best.epoch_cost && entry.power_limit_w > best.power_limit_w)) {
      best = {entry.power_limit_w, cost, entry.time_per_epoch_s, entry.avg_power_w};
      first = false;
    }
  }
  return best;
}

}  // namespace joule
