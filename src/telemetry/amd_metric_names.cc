// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// AMD GPUs under the names and labels of AMD's own exporter, the AMD Device
// Metrics Exporter (github.com/ROCm/device-metrics-exporter), so that a
// dashboard built for it works when pointed at joule. The same readings are
// served under dcgm-exporter's names too (energy_exporter.cc); which of AMD's
// fields joule fills, and which it cannot, is in docs/telemetry.md.
#include <fmt/format.h>

#include "joule/telemetry/energy_exporter.h"
#include "telemetry/prometheus_text.h"

namespace joule {

using prometheus_text::escaped;
using prometheus_text::Family;

void EnergyExporter::render_amd_metric_names(std::string& out,
                                             const std::vector<std::optional<TimelineSample>>& latest) const {
  std::vector<std::size_t> amd;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (gpus_[i]->backend() == "rocm") amd.push_back(i);
  }
  if (amd.empty()) return;  // no empty families on a node without AMD GPUs
  // AMD's default labels that joule knows (gpu_id: the index among the AMD
  // GPUs, as amd-smi numbers them), and joule's gpu to join its own series.
  const auto labels = [&](std::size_t i) {
    const Gpu& gpu = *gpus_[i];
    return fmt::format(R"(gpu_id="{}",gpu_uuid="{}",card_model="{}",hostname="{}",gpu="{}")", vendor_index(i),
                       escaped(gpu.uuid()), escaped(gpu.name()), escaped(options_.hostname), gpu.index());
  };
  {
    Family family(out, "gpu_nodes_total", "gauge", "Number of AMD GPUs served (AMD exporter name).");
    family.add(fmt::format(R"(hostname="{}")", escaped(options_.hostname)), static_cast<double>(amd.size()));
  }
  // A reading of a GPU that is up, where the sampler has one; a lost GPU's
  // gauges go, as under dcgm-exporter's names.
  const auto gauge = [&](const char* name, const char* help, auto value_of) {
    Family family(out, name, "gauge", help);
    for (const std::size_t i : amd) {
      if (!latest[i] || !gpu_states_[i].up) continue;
      if (const std::optional<double> v = value_of(i, *latest[i]); v) family.add(labels(i), *v);
    }
  };
  const auto known = [](auto v) { return v >= 0 ? std::optional<double>(static_cast<double>(v)) : std::nullopt; };
  // ROCm SMI's power is the average socket power where the GPU keeps one
  // (MI200 and earlier) and the current socket power otherwise (MI300): AMD
  // serves them as gpu_average_package_power and gpu_package_power, and
  // gpu_power_usage as either.
  const auto power_from = [&](const char* source) {
    return [this, source](std::size_t i, const TimelineSample& s) {
      return gpus_[i]->power_reading_source().find(source) != std::string::npos ? std::optional<double>(s.power_w)
                                                                                : std::nullopt;
    };
  };
  gauge("gpu_power_usage", "GPU power usage in Watts (AMD exporter name).",
        [](std::size_t, const TimelineSample& s) { return std::optional<double>(s.power_w); });
  gauge("gpu_package_power", "Current socket power in Watts (AMD exporter name).", power_from("current socket"));
  gauge("gpu_average_package_power", "Average socket power in Watts (AMD exporter name).", power_from("average"));
  gauge("gpu_gfx_activity", "Graphics engine usage in percent, 0-100 (AMD exporter name).",
        [&](std::size_t, const TimelineSample& s) { return known(s.gpu_util_percent); });
  gauge("gpu_umc_activity", "Memory engine usage in percent, 0-100 (AMD exporter name).",
        [&](std::size_t, const TimelineSample& s) { return known(s.memory_util_percent); });
  gauge("gpu_junction_temperature", "Junction (hotspot) temperature in Celsius (AMD exporter name).",
        [&](std::size_t, const TimelineSample& s) { return known(s.temperature_c); });
  gauge("gpu_used_vram", "Used VRAM in MB, 2^20 bytes (AMD exporter name).", [](std::size_t, const TimelineSample& s) {
    return s.memory_used_bytes >= 0 ? std::optional<double>(static_cast<double>(s.memory_used_bytes >> 20))
                                    : std::nullopt;
  });
  {
    // AMD serves every clock domain in one family told apart by clock_type.
    Family family(out, "gpu_clock", "gauge", "Current GPU clock frequencies in MHz (AMD exporter name).");
    for (const std::size_t i : amd) {
      if (!gpu_states_[i].up) continue;
      if (latest[i] && latest[i]->sm_clock_mhz >= 0) {
        family.add(fmt::format(R"(clock_type="system",{})", labels(i)), latest[i]->sm_clock_mhz);
      }
      if (gpu_states_[i].memory_clock_mhz) {
        family.add(fmt::format(R"(clock_type="memory",{})", labels(i)), *gpu_states_[i].memory_clock_mhz);
      }
    }
  }
  {
    // AMD's is the GPU's counter since boot; joule's counts from the
    // exporter's start, like DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: a rate,
    // increase or delta over a range is the same, a raw value is not. A lost
    // GPU's stays at what was read.
    Family family(out, "gpu_energy_consumed", "counter",
                  "Energy consumed by the GPU since the exporter started, or since its ledger began (--ledger), in uJ (AMD exporter name).");
    for (const std::size_t i : amd) family.add(labels(i), ledger_.gpu_energy_j(i) * 1e6);
  }
}

}  // namespace joule
