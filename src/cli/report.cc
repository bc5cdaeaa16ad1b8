// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/carbon_options.h"
#include "joule/common/utf8.h"
#include "joule/version.h"

namespace joule::cli {

MeasureReport build_report(const std::vector<std::string>& command, int exit_status, const Devices& devices,
                           Monitor& monitor, const Measurement& m) {
  MeasureReport r;
  r.command = command;
  r.exit_status = exit_status;
  r.elapsed_s = m.elapsed_s;
  r.gpu_backend = devices.gpu_backend;
  r.gpu_backend_reason = devices.gpu_backend_reason;
  r.simulated = devices.simulated();
  r.interval_s = monitor.sampler().options().interval_s;
  r.notes = devices.cpu_problems;
  r.warnings = m.warnings;
  const double end_s = m.begin_s + m.elapsed_s;
  auto average = [&](double energy_j) { return m.elapsed_s > 0 ? energy_j / m.elapsed_s : 0.0; };
  auto peak = [&](std::size_t timeline_device) {
    return monitor.timeline().peak_power_w(static_cast<uint32_t>(timeline_device), m.begin_s, end_s).value_or(0.0);
  };
  // Device ids are the timeline's names ("gpu0", "cpu0-package"): one naming scheme.
  const auto& ids = monitor.timeline().device_names();
  const auto& gpus = monitor.gpus();
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    r.devices.push_back({ids[i], "gpu", gpus[i]->name(), gpus[i]->backend(), gpus[i]->simulated(),
                         m.gpu_energy_j[i], average(m.gpu_energy_j[i]), peak(i),
                         monitor.sampler().gpu_method_description(i), m.gpu_sources.at(i).counter_anchored,
                         monitor.timeline().power_capped_share(static_cast<uint32_t>(i), m.begin_s, end_s)});
  }
  std::size_t package = 0, dram = 0;
  const auto& zones = monitor.cpu_zones();
  for (std::size_t i = 0; i < zones.size(); ++i) {
    const bool is_package = zones[i]->domain() == CpuDomain::kPackage;
    const double energy_j = is_package ? m.cpu_package_energy_j[package++] : m.dram_energy_j[dram++];
    r.devices.push_back({ids[gpus.size() + i], is_package ? "cpu_package" : "dram", zones[i]->name(), "rapl", false, energy_j,
                         average(energy_j), peak(gpus.size() + i), "", false, std::nullopt});
  }
  r.total_energy_j = m.total_energy_j();
  r.settled = m.settled;
  return r;
}

namespace {

// Text from outside (the command's arguments, a driver's or sysfs's names,
// warnings quoting them) in the JSON report: dump() throws on invalid
// UTF-8, which lost the report of a command that had run. Such text is
// shown as printable() shows it.
std::string json_text(const std::string& text) { return valid_utf8_or_printable(text); }

std::vector<std::string> json_text(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const auto& text : texts) out.push_back(json_text(text));
  return out;
}

}  // namespace

nlohmann::json to_json(const MeasureReport& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices) {
    nlohmann::json device = {{"id", d.id},
                             {"kind", d.kind},
                             {"name", json_text(d.name)},
                             {"backend", d.backend},
                             {"simulated", d.simulated},
                             {"energy_j", d.energy_j},
                             {"avg_power_w", d.avg_power_w},
                             {"peak_power_w", d.peak_power_w}};
    if (d.kind == "gpu") {
      device["energy_method"] = json_text(d.energy_method);
      device["counter_anchored"] = d.counter_anchored;
      if (d.power_capped_share) device["power_capped_share"] = *d.power_capped_share;
    }
    devices.push_back(std::move(device));
  }
  nlohmann::json json = {{"joule_version", version()},
          {"command", json_text(r.command)},
          {"exit_status", r.exit_status},
          {"elapsed_s", r.elapsed_s},
          {"simulated", r.simulated},
          {"gpu_backend", r.gpu_backend},
          {"gpu_backend_reason", json_text(r.gpu_backend_reason)},
          {"sampling_interval_s", r.interval_s},
          {"devices", devices},
          {"total_energy_j", r.total_energy_j},
          {"settled", r.settled},
          {"notes", json_text(r.notes)},
          {"warnings", json_text(r.warnings)}};
  if (r.carbon_basis && r.carbon) json["carbon"] = carbon_json(*r.carbon_basis, *r.carbon);
  return json;
}

namespace {

// One short line before the table (each device row is marked too): asked for,
// or no GPU usable, and where the full reason is (`joule info`, the JSON's
// gpu_backend_reason), rather than the drivers' whole story on every run.
std::string simulated_banner(const MeasureReport& r) {
  const bool asked = r.gpu_backend_reason.rfind("simulated GPUs requested", 0) == 0;
  return fmt::format("joule: GPUs are SIMULATED, not measured: {}\n",
                     asked ? "asked for (--backend sim)" : "no NVIDIA or AMD GPU usable here ('joule info' says why)");
}

}  // namespace

std::string to_text(const MeasureReport& r) {
  std::string command;
  for (const auto& arg : r.command) command += (command.empty() ? "" : " ") + arg;
  std::string out = fmt::format("joule: `{}` exited with status {} after {:.3f} s\n", command, r.exit_status,
                                r.elapsed_s);
  if (r.simulated) out += simulated_banner(r);
  std::size_t width = std::string("total").size();
  std::vector<std::string> labels;
  for (const auto& d : r.devices) {
    labels.push_back(fmt::format("{} {}{}", d.id, d.name, d.simulated ? " [SIMULATED]" : ""));
    width = std::max(width, labels.back().size());
  }
  out += fmt::format("  {:<{}}  {:>12}  {:>11}  {:>11}\n", "device", width, "energy", "avg power", "peak power");
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const auto& d = r.devices[i];
    out += fmt::format("  {:<{}}  {:>10.3f} J  {:>9.2f} W  {:>9.2f} W\n", labels[i], width, d.energy_j,
                       d.avg_power_w, d.peak_power_w);
  }
  out += fmt::format("  {:<{}}  {:>10.3f} J  {:>9.2f} W\n", "total", width, r.total_energy_j,
                     r.elapsed_s > 0 ? r.total_energy_j / r.elapsed_s : 0.0);
  for (const auto& d : r.devices) {
    if (!d.energy_method.empty()) {
      out += fmt::format("joule: {} energy from {}{}\n", d.id, d.energy_method,
                         d.counter_anchored ? " (this run: counter-anchored)" : "");
    }
    if (d.power_capped_share) {
      out += fmt::format("joule: {} at its power cap in {:.1f}% of samples (the limit held its clocks down)\n", d.id,
                         100.0 * *d.power_capped_share);
    }
  }
  if (r.carbon_basis && r.carbon) out += carbon_text(*r.carbon_basis, *r.carbon);
  for (const auto& note : r.notes) out += fmt::format("joule: note: {}\n", note);
  for (const auto& warning : r.warnings) out += fmt::format("joule: warning: {}\n", warning);
  return out;
}

}  // namespace joule::cli
