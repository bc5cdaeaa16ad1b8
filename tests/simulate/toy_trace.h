// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The deterministic toy workload the simulator tests share: every run of a
// batch size needs the same epochs (16 never reaches the target, 32: 10,
// 64: 8, 128: 12), and every batch size has the same time and power per
// epoch, so cost follows epochs alone. b=64 at 100 W is optimal: 8 x 1770.
#pragma once

#include <string>

#include "joule/simulate/trace.h"

namespace joule::testing {

inline WorkloadTrace toy_trace(const std::string& dataset = "toy") {
  WorkloadTrace t;
  t.spec = {"toy", dataset, "net", "sgd", 0.5, "toy target", 64};
  t.default_batch_size = 64;
  t.batch_sizes = {16, 32, 64, 128};
  t.epochs = {{16, {std::nullopt, std::nullopt}}, {32, {10, 10}}, {64, {8, 8}}, {128, {12, 12}}};
  t.power_limits_w = {100, 200};
  t.max_power_w = 200;
  t.max_epochs = 40;
  for (int b : t.batch_sizes) t.power[b] = {{100, 12.0, 95}, {200, 10.0, 190}};
  return t;
}

}  // namespace joule::testing
