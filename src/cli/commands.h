// The `joule` subcommands. Each parses nothing itself: main.cc owns the
// command line and hands over typed options.
#pragma once

#include <string>
#include <vector>

#include "joule/device/discovery.h"

namespace joule::cli {

// Options every subcommand accepts.
struct CommonOptions {
  std::string backend = "auto";  // auto | nvml | sim
  std::string sim_spec;          // see parse_sim_spec()
  std::string gpus;              // "0,2": comma-separated indices; empty: all

  DiscoveryOptions discovery() const;
  // Discovers devices and applies the --gpus selection. Throws UsageError.
  Devices open_devices() const;
};

struct InfoOptions {
  bool json = false;
};
int run_info(const CommonOptions& common, const InfoOptions& options);

struct MeasureOptions {
  double interval_ms = 100.0;
  double counter_interval_ms = 5000.0;
  std::string timeline_path;
  std::string output_path;  // report goes here instead of stdout/stderr
  bool json = false;
  std::vector<std::string> sample_fields;  // util, clock, temp, mem
  std::vector<std::string> command;
};
int run_measure(const CommonOptions& common, const MeasureOptions& options);

}  // namespace joule::cli
