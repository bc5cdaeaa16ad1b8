// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Turns a measured command into the text and JSON `joule measure` prints.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/carbon/carbon.h"
#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"

namespace joule::cli {

struct DeviceReport {
  std::string id;    // "gpu0", "cpu0-package", "cpu0-dram"
  std::string kind;  // "gpu", "cpu_package", "dram"
  std::string name;
  std::string backend;
  bool simulated = false;
  double energy_j = 0.0;
  double avg_power_w = 0.0;
  double peak_power_w = 0.0;  // 0 when no sample fell inside the run
  std::string energy_method;  // GPUs: how the energy was obtained, in words
  bool counter_anchored = false;  // GPUs: the run's edges pinned to energy-counter steps
  // GPUs with --sample cap: the share of the run's samples at the power cap.
  std::optional<double> power_capped_share;
};

struct MeasureReport {
  std::vector<std::string> command;
  int exit_status = 0;
  double elapsed_s = 0.0;
  std::string gpu_backend;
  std::string gpu_backend_reason;
  bool simulated = false;
  double interval_s = 0.0;
  std::vector<DeviceReport> devices;
  std::vector<std::string> notes;     // why devices are missing (RAPL unreadable, ...)
  std::vector<std::string> warnings;  // devices that failed during the run
  double total_energy_j = 0.0;
  bool settled = false;  // every device's data reached past the end of the run
  // With --carbon-region/--carbon-intensity/--price: the total's footprint.
  std::optional<carbon::Basis> carbon_basis;
  std::optional<carbon::Footprint> carbon;
};

MeasureReport build_report(const std::vector<std::string>& command, int exit_status, const Devices& devices,
                           Monitor& monitor, const Measurement& measurement);
nlohmann::json to_json(const MeasureReport& report);
std::string to_text(const MeasureReport& report);

}  // namespace joule::cli
