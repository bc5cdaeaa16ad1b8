// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The knob the just-in-time optimizer turns on every GPU of a job: the power
// limit, or the SM or memory clock cap. Private to the optimizer: its
// candidates, how a value is applied to one GPU, and how what was there
// before is put back.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/device/gpu.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace joule {

class KnobControl {
 public:
  // Reads what is in force on every GPU and lays out the candidates. Throws
  // UsageError when the GPUs share no setting, DeviceError when they cannot
  // be read.
  static std::unique_ptr<KnobControl> create(const PowerLimitOptimizerOptions& options,
                                             std::vector<std::shared_ptr<Gpu>> gpus);
  virtual ~KnobControl() = default;

  OptimizerKnob knob() const { return knob_; }
  // Least constrained first (largest limit or clock), in the knob's unit.
  const std::vector<double>& candidates() const { return candidates_; }
  // The value in force on the first GPU before the optimizer started.
  double original() const { return original_; }
  // "650 W", "SM clock cap 1410 MHz".
  std::string describe(double value) const;
  std::string with_unit(double value) const;  // "650 W", "1410 MHz"
  std::string column_header() const;  // "limit W", "SM cap MHz"

  // Puts value on GPU i, skipping a driver call that would change nothing.
  // Throws DeviceError (kNoPermission when the process may not).
  virtual void apply(std::size_t i, double value) = 0;
  // Puts back what GPU i had before.
  virtual void restore(std::size_t i) = 0;

 protected:
  KnobControl(OptimizerKnob knob, std::vector<std::shared_ptr<Gpu>> gpus) : knob_(knob), gpus_(std::move(gpus)) {}

  OptimizerKnob knob_;
  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<double> candidates_;
  double original_ = 0.0;
};

}  // namespace joule
