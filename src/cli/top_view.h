// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What `joule top` shows, as plain data, and how it is laid out into lines.
// No terminal I/O here: a frame is a list of strings, each at most the
// terminal's width in columns, so layout is testable without a terminal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace joule::cli {

enum class EnergyUnit { kJoule, kKilojoule, kWattHour };

// J -> kJ -> Wh -> J (the `u` key).
EnergyUnit next_unit(EnergyUnit unit);
const char* unit_symbol(EnergyUnit unit);  // "J", "kJ", "Wh"
// "j", "kj", "wh" (any case); throws UsageError otherwise.
EnergyUnit parse_energy_unit(const std::string& text);
// "12.345 kJ": joules converted to unit, with the unit's symbol.
std::string format_energy(double energy_j, EnergyUnit unit);

struct TopGpuRow {
  std::string id;    // "gpu0"
  std::string name;  // "NVIDIA H100 80GB HBM3"
  // Mean power over the last refresh interval; nullopt before the first one.
  std::optional<double> power_w;
  std::vector<double> power_history_w;  // oldest first, one per refresh
  double energy_j = 0.0;                // since start or the last reset
  std::optional<double> power_limit_w;
  std::optional<double> max_power_limit_w;  // the sparkline's full scale
  std::string limit_holder = "-";           // jouled lease holder, "-" when none or unknown
  std::optional<int> gpu_util_percent;
  std::optional<int> sm_clock_mhz;
  std::optional<int> temperature_c;
  std::optional<std::string> problem;  // the device failed: why
  std::optional<uint64_t> memory_used_bytes;  // shown where the row has room
  // Who uses the GPU (its processes, below); nullopt where the backend cannot
  // tell, with why in processes_problem.
  std::optional<std::size_t> process_count;
  std::optional<std::string> processes_problem;
};

// A process with a context on a GPU, as `nvidia-smi` and nvtop list them.
struct TopProcessRow {
  std::string gpu_id;   // "gpu0"
  uint32_t pid = 0;
  std::string user = "-";     // its real user's name (or uid); "-" when gone
  std::string job = "-";      // "slurm/12345", "kubernetes/<pod uid>"; "-" when none
  std::string command = "-";  // its command line, else its name; "-" when unreadable
  std::optional<uint64_t> used_memory_bytes;  // none where the driver will not say
};

struct TopZoneRow {
  std::string label;  // "cpu0 package-0"
  std::optional<double> power_w;
  double energy_j = 0.0;
  std::optional<std::string> problem;
};

struct TopSnapshot {
  std::string backend;  // Devices::gpu_backend: "nvml", "rocm", "nvml+rocm" or "sim"
  bool simulated = false;
  double since_reset_s = 0.0;
  double interval_s = 1.0;
  std::vector<TopGpuRow> gpus;
  std::vector<TopZoneRow> zones;
  std::vector<std::string> zone_problems;  // why RAPL zones are missing
  std::string daemon_status;               // "jouled at /run/...: 0 leases" or why not
  std::vector<TopProcessRow> processes;    // by GPU, then pid
};

struct FrameLayout {
  int width_cols = 80;
  int height_rows = 24;
  EnergyUnit unit = EnergyUnit::kJoule;
  bool unicode = true;     // block-character sparklines; else ASCII
  bool show_help = false;  // the `h` key's page instead of the devices
  bool show_processes = false;  // the `p` key's per-process table instead of the GPU rows
};

// The interactive frame: at most height_rows lines of at most width_cols
// columns each (never a line more: the caller must not scroll the screen).
std::vector<std::string> render_frame(const TopSnapshot& snapshot, const FrameLayout& layout);

// For a stdout that is not a terminal: one line per device, then one per
// process using a GPU ("<gpu> process pid=..."), no escape codes, stable
// key=value fields for scripts.
std::vector<std::string> render_plain(const TopSnapshot& snapshot, EnergyUnit unit);

// The last width values as bars scaled to full_scale_w: Unicode eighth
// blocks, or " .:-=+*#" in ASCII. Shorter histories are padded on the left.
std::string sparkline(const std::vector<double>& values_w, double full_scale_w, int width, bool unicode);

// Columns a string takes on a terminal: code points (joule prints only
// single-width characters).
int display_width(std::string_view text);
// The longest prefix of text that fits in width_cols columns.
std::string fit_to_width(std::string_view text, int width_cols);
// text on at most max_lines lines of at most width_cols columns: broken at
// spaces where it can be (mid-word where a word is longer than a line), the
// last line ending in "..." when the text does not fit. Continuation lines
// start with indent (counted in the width).
std::vector<std::string> wrap_to_width(std::string_view text, int width_cols, int max_lines,
                                       std::string_view indent = "  ");
// "512 MiB", "12.3 GiB"; "-" for none.
std::string format_memory(const std::optional<uint64_t>& bytes);

}  // namespace joule::cli
