// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// sqrt(a^2 + b^2): the spread of a sum or difference of two independent
// estimates from their standard errors, or a distance on a chart.
//
// Why not std::hypot: built against glibc >= 2.35 it binds to hypot@GLIBC_2.35,
// and that one symbol would raise the glibc the prebuilt wheel needs from 2.34
// to 2.35, leaving out RHEL 9 (docs/install.md; scripts/dist-test.sh checks
// the wheel's tag). hypot's care against overflow buys nothing here: standard
// errors and chart distances are far from 1e154.
#pragma once

#include <cmath>

namespace joule {

inline double root_sum_square(double a, double b) { return std::sqrt(a * a + b * b); }

}  // namespace joule
