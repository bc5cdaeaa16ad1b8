// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the sweep file as `joule sweep --dry-run` reads it:
// the bytes are the TOML file, loaded, then (grids of up to 2,000 runs)
// expanded into runs with each run's store key, command and node layout,
// and the plan put into JSON as `joule analyze --json` puts stored
// configurations. Any bytes must give a plan or a UsageError whose text is
// UTF-8 (naming file, line and column), never a crash, an undefined
// behaviour or another exception (dump() throws on invalid UTF-8, and an
// escaped exception aborts the target).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace {

void require_utf8(const std::string& text) {
  if (!joule::is_valid_utf8(text)) __builtin_trap();
}

nlohmann::json plan_of(const joule::SweepConfig& config) {
  nlohmann::json plan = {{"command", config.command},   {"launcher", config.launcher},
                         {"repeats", config.repeats},   {"store", config.store_path},
                         {"gpus_per_node", config.gpus_per_node}, {"launcher_options", config.launcher_options}};
  for (const auto& [key, values] : config.grid) {
    plan["grid"][key] = values;
    require_utf8(config.where(key, values.size() - 1));
  }
  if (joule::grid_run_count(config) > 2000) return plan;
  const auto runs = joule::expand_grid(config);
  if (static_cast<long long>(runs.size()) != joule::grid_run_count(config)) __builtin_trap();
  for (const auto& point : runs) {
    nlohmann::json run = {{"key", point.config_key()}, {"repeat", point.repeat}};
    try {
      run["command"] = joule::run_command(config, point);
    } catch (const joule::UsageError& e) {  // a placeholder the grid lacks
      require_utf8(e.what());
      run["error"] = e.what();
    }
    const joule::NodeLayout layout = joule::node_layout(config, point);
    // The layout's GPUs are the point's: the value checked at load is the one used.
    if (point.values.count("gpus") && layout.gpus != std::strtod(point.values.at("gpus").c_str(), nullptr)) {
      __builtin_trap();
    }
    if (layout.nodes < 1 || layout.ranks_per_node < 1) __builtin_trap();
    plan["runs"].push_back(run);
  }
  return plan;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "/tmp/joule-sweep-file-fuzz-" + std::to_string(getpid()) + ".toml";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  nlohmann::json out;
  try {
    out = plan_of(joule::SweepConfig::load(path));
  } catch (const joule::UsageError& e) {
    // The documented outcome of a bad sweep file.
    require_utf8(e.what());
    out = {{"error", e.what()}};
  }
  (void)out.dump();
  return 0;
}
