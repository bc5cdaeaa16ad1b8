// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The cost joule minimises for a recurring training job (the Zeus cost):
//   C = eta * energy + (1 - eta) * max_power * time
// with eta in [0, 1] trading energy (1) against time (0), and max_power the
// GPU's largest power limit so both terms are in joules.
#pragma once

#include <vector>

namespace joule {

// Throws UsageError unless 0 <= eta <= 1.
void check_eta(double eta);

double zeus_cost(double energy_j, double time_s, double eta, double max_power_w);

// One power limit's measurement for a given batch size.
struct PowerProfileEntry {
  double power_limit_w = 0.0;
  double time_per_epoch_s = 0.0;
  double avg_power_w = 0.0;
};

struct PowerChoice {
  double power_limit_w = 0.0;
  double epoch_cost = 0.0;  // (eta * avg_power + (1 - eta) * max_power) * time_per_epoch
  double time_per_epoch_s = 0.0;
  double avg_power_w = 0.0;
};

// The limit minimising the cost of one epoch. Epochs to reach the target do
// not depend on the power limit, so this choice is independent of how many
// epochs a run needs. Throws UsageError for an empty profile. Ties go to the
// higher limit (faster).
PowerChoice optimal_power_limit(const std::vector<PowerProfileEntry>& profile, double eta, double max_power_w);

}  // namespace joule
