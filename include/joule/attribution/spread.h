// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The spread of a quantity over bootstrap rounds: what attribution's
// intervals are made of (over resampled observations, and over refits with
// resampled sample responses).
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

namespace joule::attribution {

struct Spread {
  double low = std::numeric_limits<double>::quiet_NaN();   // the central interval's ends
  double high = std::numeric_limits<double>::quiet_NaN();  // (NaN: undetermined)
  double std = std::numeric_limits<double>::quiet_NaN();   // the rounds' standard deviation
  std::size_t missing = 0;                                 // rounds that did not determine it
};

// The central `confidence` interval of the rounds (percentiles) and their
// standard deviation. A round that is not finite did not determine the
// value: it counts against the interval (conservatively, as -inf for the
// lower end and +inf for the upper), so enough of them leave it NaN.
Spread spread_of(const std::vector<double>& rounds, double confidence);

}  // namespace joule::attribution
