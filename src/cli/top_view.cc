// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "joule/error.h"

namespace joule::cli {

namespace {

constexpr double kJoulesPerWattHour = 3600.0;
// Lines a RAPL or jouled message may take before it is cut with "...".
constexpr int kMessageLines = 3;

// Eighth blocks from empty to full; one column each.
constexpr std::string_view kUnicodeLevels[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
constexpr std::string_view kAsciiLevels = " .:-=+*#@";

// J with one decimal; kJ and Wh with three (1 J and 0.28 mWh resolution).
std::string energy_number(double energy_j, EnergyUnit unit) {
  switch (unit) {
    case EnergyUnit::kJoule: return fmt::format("{:.1f}", energy_j);
    case EnergyUnit::kKilojoule: return fmt::format("{:.3f}", energy_j / 1000.0);
    case EnergyUnit::kWattHour: return fmt::format("{:.3f}", energy_j / kJoulesPerWattHour);
  }
  return {};
}

std::string or_dash(const std::optional<int>& value, std::string_view suffix) {
  return value ? fmt::format("{}{}", *value, suffix) : std::string("-");
}

std::string watts(const std::optional<double>& power_w) {
  return power_w ? fmt::format("{:.1f} W", *power_w) : std::string("- W");
}

std::string clock_text(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

// left, then right pushed to the right edge; left is cut first when both do
// not fit.
std::string spread(std::string_view left, std::string_view right, int width_cols) {
  const int right_cols = display_width(right);
  const int room = std::max(0, width_cols - right_cols - 1);
  std::string line = fit_to_width(left, room);
  line.append(static_cast<std::size_t>(std::max(1, width_cols - display_width(line) - right_cols)), ' ');
  line += right;
  return line;
}

// The sparkline's columns not yet covered by history: a baseline, so that a
// wide row has no blank gap between the power and the first bar.
std::string sparkline_with_baseline(const std::vector<double>& values_w, double full_scale_w, int width, bool unicode) {
  std::string line = sparkline(values_w, full_scale_w, width, unicode);
  const std::size_t empty = static_cast<std::size_t>(std::max(0, width - static_cast<int>(values_w.size())));
  if (empty == 0) return line;
  std::string baseline;
  for (std::size_t i = 0; i < empty; ++i) baseline += unicode ? "·" : "_";
  return baseline + line.substr(empty);
}

// Columns of the second row beyond the basic readings, in the order they are
// added while the sparkline keeps kSparkMinForExtras columns.
constexpr int kSparkMinForExtras = 48;

std::vector<std::string> gpu_block(const TopGpuRow& gpu, const FrameLayout& layout) {
  const std::string limit = gpu.power_limit_w ? fmt::format("{:.0f} W", *gpu.power_limit_w) : std::string("-");
  std::vector<std::string> lines;
  lines.push_back(spread(fmt::format("{} {}", gpu.id, gpu.name),
                         fmt::format("limit {}  held by {}", limit, gpu.limit_holder), layout.width_cols));
  if (gpu.problem) {
    lines.push_back("  failed: " + *gpu.problem);
    return lines;
  }
  std::string readings =
      fmt::format("{:>12}  util {:>4}  {:>8}  {:>5}", format_energy(gpu.energy_j, layout.unit),
                  or_dash(gpu.gpu_util_percent, "%"), or_dash(gpu.sm_clock_mhz, " MHz"), or_dash(gpu.temperature_c, " C"));
  const std::string power = fmt::format("  {:>9} ", watts(gpu.power_w));
  // Wide rows: columns grow (memory, then processes) while the sparkline
  // keeps room; it takes whatever the fields leave.
  auto spark_room = [&](const std::string& fields) {
    return layout.width_cols - display_width(power) - display_width(fields) - 2;
  };
  const std::vector<std::string> extras = {
      fmt::format("  mem {:>9}", format_memory(gpu.memory_used_bytes)),
      fmt::format("  procs {:>2}", gpu.process_count ? std::to_string(*gpu.process_count) : std::string("-")),
  };
  for (const auto& extra : extras) {
    if (spark_room(readings + extra) < kSparkMinForExtras) break;
    readings += extra;
  }
  const int spark_cols = spark_room(readings);
  double full_scale_w = gpu.max_power_limit_w.value_or(0.0);
  for (double w : gpu.power_history_w) full_scale_w = std::max(full_scale_w, w);
  std::string line = power;
  if (spark_cols > 0) line += sparkline_with_baseline(gpu.power_history_w, full_scale_w, spark_cols, layout.unicode) + "  ";
  lines.push_back(line + readings);
  return lines;
}

// The `p` view: one row per process using a GPU; the command takes the
// columns the fixed ones leave.
std::vector<std::string> process_rows(const TopSnapshot& snapshot, int width) {
  const bool wide = width >= 120;
  const int user_cols = wide ? 14 : 10, job_cols = wide ? 28 : 14;
  auto row = [&](std::string_view gpu, std::string_view pid, std::string_view user, std::string_view job,
                 std::string_view memory, std::string_view command) {
    return fmt::format("{:<5} {:>8}  {:<{}} {:<{}} {:>9}  {}", gpu, pid, fit_to_width(user, user_cols), user_cols,
                       fit_to_width(job, job_cols), job_cols, memory, command);
  };
  std::vector<std::string> rows;
  rows.push_back(row("GPU", "PID", "USER", "JOB", "GPU MEM", "COMMAND"));
  for (const auto& gpu : snapshot.gpus) {
    bool any = false;
    for (const auto& p : snapshot.processes) {
      if (p.gpu_id != gpu.id) continue;
      any = true;
      rows.push_back(row(p.gpu_id, std::to_string(p.pid), p.user, p.job, format_memory(p.used_memory_bytes), p.command));
    }
    if (any) continue;
    rows.push_back(gpu.processes_problem ? fmt::format("{:<5} processes unknown: {}", gpu.id, *gpu.processes_problem)
                                         : fmt::format("{:<5} no processes", gpu.id));
  }
  return rows;
}

std::vector<std::string> help_page() {
  return {
      "keys",
      "  q       quit (also Ctrl-C)",
      "  r       reset energy counters to 0 (the time since reset restarts)",
      "  u       switch energy units: J, kJ, Wh",
      "  p       processes using each GPU (pid, user, job, GPU memory) or back",
      "  h       this page; any key returns",
      "",
      "per GPU",
      "  line 1  index, name, power limit in force, the jouled lease holding it",
      "  line 2  mean power over the last refresh, its history (full scale: the",
      "          largest settable limit), energy since reset, utilisation,",
      "          SM clock, temperature; wide rows add GPU memory and the",
      "          number of processes",
      "RAPL zones: CPU package and DRAM power and energy since reset.",
      "Short of rows: the header, then total, RAPL and jouled (each message",
      "wrapped onto three lines at most), then as many GPUs as fit.",
      "Not a terminal? `joule top | cat` prints key=value lines instead.",
  };
}

}  // namespace

EnergyUnit next_unit(EnergyUnit unit) {
  switch (unit) {
    case EnergyUnit::kJoule: return EnergyUnit::kKilojoule;
    case EnergyUnit::kKilojoule: return EnergyUnit::kWattHour;
    case EnergyUnit::kWattHour: return EnergyUnit::kJoule;
  }
  return EnergyUnit::kJoule;
}

const char* unit_symbol(EnergyUnit unit) {
  switch (unit) {
    case EnergyUnit::kJoule: return "J";
    case EnergyUnit::kKilojoule: return "kJ";
    case EnergyUnit::kWattHour: return "Wh";
  }
  return "J";
}

EnergyUnit parse_energy_unit(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "j") return EnergyUnit::kJoule;
  if (lower == "kj") return EnergyUnit::kKilojoule;
  if (lower == "wh") return EnergyUnit::kWattHour;
  throw UsageError(fmt::format("--unit: unknown unit '{}' (expected J, kJ or Wh)", text));
}

std::string format_energy(double energy_j, EnergyUnit unit) {
  return energy_number(energy_j, unit) + " " + unit_symbol(unit);
}

int display_width(std::string_view text) {
  // UTF-8 continuation bytes (10xxxxxx) do not start a character.
  return static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string fit_to_width(std::string_view text, int width_cols) {
  int cols = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((text[i] & 0xC0) != 0x80 && ++cols > width_cols) return std::string(text.substr(0, i));
  }
  return std::string(text);
}

std::vector<std::string> wrap_to_width(std::string_view text, int width_cols, int max_lines, std::string_view indent) {
  std::vector<std::string> lines;
  width_cols = std::max(1, width_cols);
  const int indent_cols = display_width(indent) < width_cols ? display_width(indent) : 0;
  std::string_view rest = text;
  while (!rest.empty() && static_cast<int>(lines.size()) < std::max(1, max_lines)) {
    const bool first = lines.empty();
    const int room = width_cols - (first ? 0 : indent_cols);
    const std::string prefix = first ? std::string() : std::string(indent.substr(0, indent_cols ? indent.size() : 0));
    if (display_width(rest) <= room) {
      lines.push_back(prefix + std::string(rest));
      rest = {};
      break;
    }
    const bool last = static_cast<int>(lines.size()) + 1 >= max_lines;
    if (last) {
      lines.push_back(prefix + (room > 3 ? fit_to_width(rest, room - 3) + "..." : fit_to_width(rest, room)));
      rest = {};
      break;
    }
    // Break at the last space that leaves the line within room, unless that
    // would leave most of the line empty (one long word: broken inside).
    const std::string head = fit_to_width(rest, room);
    std::size_t cut = head.size();
    if (rest[head.size()] != ' ') {
      const std::size_t space = head.rfind(' ');
      if (space != std::string::npos && space > 0 && display_width(head.substr(0, space)) >= room / 2) cut = space;
    }
    lines.push_back(prefix + std::string(rest.substr(0, cut)));
    rest = rest.substr(cut);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  }
  if (lines.empty()) lines.emplace_back();
  return lines;
}

std::string format_memory(const std::optional<uint64_t>& bytes) {
  if (!bytes) return "-";
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
  if (static_cast<double>(*bytes) >= 10.0 * kGiB) return fmt::format("{:.1f} GiB", static_cast<double>(*bytes) / kGiB);
  return fmt::format("{:.0f} MiB", static_cast<double>(*bytes) / kMiB);
}

std::string sparkline(const std::vector<double>& values_w, double full_scale_w, int width, bool unicode) {
  if (width <= 0) return {};
  const std::size_t shown = std::min(values_w.size(), static_cast<std::size_t>(width));
  std::string line(static_cast<std::size_t>(width) - shown, ' ');
  for (std::size_t i = values_w.size() - shown; i < values_w.size(); ++i) {
    const double fraction = full_scale_w > 0 ? values_w[i] / full_scale_w : 0.0;
    const int level = static_cast<int>(std::clamp(std::lround(fraction * 8.0), 0L, 8L));
    if (unicode) {
      line += kUnicodeLevels[level];
    } else {
      line += kAsciiLevels[static_cast<std::size_t>(level)];
    }
  }
  return line;
}

std::vector<std::string> render_frame(const TopSnapshot& snapshot, const FrameLayout& layout) {
  const int width = std::max(1, layout.width_cols);
  const auto height = static_cast<std::size_t>(std::max(1, layout.height_rows));
  std::vector<std::string> lines;
  lines.push_back(spread(fmt::format("joule top  {} GPU{}{}", snapshot.gpus.size(), snapshot.gpus.size() == 1 ? "" : "s",
                                     snapshot.simulated ? " [SIMULATED]" : fmt::format(" ({})", snapshot.backend)),
                         fmt::format("since reset {}  every {:g} s  [{}]", clock_text(snapshot.since_reset_s),
                                     snapshot.interval_s, unit_symbol(layout.unit)),
                         width));
  lines.push_back(layout.show_processes ? "q quit  r reset  u units J/kJ/Wh  p GPUs  h help"
                                        : "q quit  r reset  u units J/kJ/Wh  p processes  h help");

  std::vector<std::string> body;
  if (layout.show_help) {
    body = help_page();
  } else {
    // Everything below the GPUs: the total, RAPL and the daemon.
    std::vector<std::string> tail;
    double total_w = 0.0, total_j = 0.0;
    for (const auto& gpu : snapshot.gpus) {
      total_w += gpu.power_w.value_or(0.0);
      total_j += gpu.energy_j;
    }
    for (const auto& zone : snapshot.zones) {
      total_w += zone.power_w.value_or(0.0);
      total_j += zone.energy_j;
    }
    tail.push_back(fmt::format("total   {:>9}  {:>12}", watts(total_w), format_energy(total_j, layout.unit)));
    for (const auto& zone : snapshot.zones) {
      tail.push_back(zone.problem ? fmt::format("{:<16} failed: {}", zone.label, *zone.problem)
                                  : fmt::format("{:<16} {:>9}  {:>12}", zone.label, watts(zone.power_w),
                                                format_energy(zone.energy_j, layout.unit)));
    }
    // Long messages wrap (at most kMessageLines lines) rather than run off the edge.
    auto add_wrapped = [&](const std::string& text) {
      for (auto& line : wrap_to_width(text, width, kMessageLines)) tail.push_back(std::move(line));
    };
    if (snapshot.zones.empty()) {
      add_wrapped("RAPL: " + (snapshot.zone_problems.empty() ? std::string("no zones") : snapshot.zone_problems[0]));
    }
    add_wrapped("jouled: " + snapshot.daemon_status);

    // GPUs get the rows left; the ones that do not fit are counted instead.
    const std::size_t room = height > lines.size() + tail.size() ? height - lines.size() - tail.size() : 0;
    if (layout.show_processes) {
      const auto rows = process_rows(snapshot, width);
      const std::size_t fit = rows.size() <= room ? rows.size() : (room > 0 ? room - 1 : 0);
      body.assign(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(fit));
      if (fit < rows.size() && room > 0) body.push_back(fmt::format("... {} more rows: enlarge the terminal", rows.size() - fit));
      body.insert(body.end(), tail.begin(), tail.end());
      lines.insert(lines.end(), body.begin(), body.end());
      if (lines.size() > height) lines.resize(height);
      for (auto& line : lines) line = fit_to_width(line, width);
      return lines;
    }
    std::size_t shown = 0;
    for (const auto& gpu : snapshot.gpus) {
      auto block = gpu_block(gpu, layout);
      const bool last = shown + 1 == snapshot.gpus.size();
      if (body.size() + block.size() + (last ? 0 : 1) > room) break;
      body.insert(body.end(), block.begin(), block.end());
      ++shown;
    }
    if (shown < snapshot.gpus.size()) {
      body.push_back(fmt::format("... {} more GPU{}: enlarge the terminal or pick some with --gpus",
                                 snapshot.gpus.size() - shown, snapshot.gpus.size() - shown == 1 ? "" : "s"));
    }
    body.insert(body.end(), tail.begin(), tail.end());
  }
  lines.insert(lines.end(), body.begin(), body.end());
  if (lines.size() > height) lines.resize(height);
  for (auto& line : lines) line = fit_to_width(line, width);
  return lines;
}

std::vector<std::string> render_plain(const TopSnapshot& snapshot, EnergyUnit unit) {
  const std::string stamp = fmt::format("t={:.1f}s", snapshot.since_reset_s);
  std::string energy_key = fmt::format("energy_{}", unit_symbol(unit));
  std::transform(energy_key.begin(), energy_key.end(), energy_key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  auto energy = [&](double energy_j) { return energy_number(energy_j, unit); };
  auto number = [](const std::optional<double>& value) { return value ? fmt::format("{:.1f}", *value) : std::string("-"); };
  auto integer = [](const std::optional<int>& value) { return value ? std::to_string(*value) : std::string("-"); };
  std::vector<std::string> lines;
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.problem) {
      lines.push_back(fmt::format("{} {} failed=\"{}\"", stamp, gpu.id, *gpu.problem));
      continue;
    }
    lines.push_back(fmt::format("{} {} power_w={} {}={} limit_w={} holder=\"{}\" util_percent={} sm_clock_mhz={} "
                                "temperature_c={}",
                                stamp, gpu.id, number(gpu.power_w), energy_key, energy(gpu.energy_j),
                                number(gpu.power_limit_w), gpu.limit_holder, integer(gpu.gpu_util_percent),
                                integer(gpu.sm_clock_mhz), integer(gpu.temperature_c)));
  }
  for (const auto& zone : snapshot.zones) {
    std::string id = zone.label;
    std::replace(id.begin(), id.end(), ' ', '-');
    lines.push_back(zone.problem ? fmt::format("{} {} failed=\"{}\"", stamp, id, *zone.problem)
                                 : fmt::format("{} {} power_w={} {}={}", stamp, id, number(zone.power_w), energy_key,
                                               energy(zone.energy_j)));
  }
  auto quoted = [](std::string text) {
    std::replace(text.begin(), text.end(), '"', '\'');
    return text;
  };
  for (const auto& p : snapshot.processes) {
    lines.push_back(fmt::format("{} {} process pid={} user=\"{}\" job=\"{}\" used_mib={} command=\"{}\"", stamp, p.gpu_id,
                                p.pid, quoted(p.user), quoted(p.job),
                                p.used_memory_bytes ? std::to_string(*p.used_memory_bytes / (1024 * 1024)) : "-",
                                quoted(p.command)));
  }
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.processes_problem) {
      lines.push_back(fmt::format("{} {} processes_unknown=\"{}\"", stamp, gpu.id, quoted(*gpu.processes_problem)));
    }
  }
  return lines;
}

}  // namespace joule::cli
