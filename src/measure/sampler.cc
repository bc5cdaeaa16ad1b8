// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The Sampler handle (it forwards to SamplerCore, sampler_core.h), the
// energy method a GPU gets and why, and the sampling interval's one check.
#include "joule/measure/sampler.h"

#include <fmt/format.h>

#include "joule/error.h"
#include "sampler_core.h"

namespace joule {

namespace detail {

std::string sample_period_words(double period_s) {
  return period_s > 0 ? fmt::format("driver power samples every {:.0f} ms", 1e3 * period_s)
                      : std::string("driver power samples");
}

}  // namespace detail

using detail::sample_period_words;
using detail::SamplerCore;

const char* to_string(GpuEnergyMethod method) {
  switch (method) {
    case GpuEnergyMethod::kPowerSamples: return "power-samples";
    case GpuEnergyMethod::kPowerReadings: return "power-readings";
  }
  return "unknown";
}

GpuEnergyMethod energy_method_for(const Gpu& gpu, const SamplerOptions& options) {
  return options.use_power_samples && gpu.has_power_samples() ? GpuEnergyMethod::kPowerSamples
                                                              : GpuEnergyMethod::kPowerReadings;
}

std::string explain_energy_method(const Gpu& gpu, const SamplerOptions& options) {
  std::string text =
      energy_method_for(gpu, options) == GpuEnergyMethod::kPowerSamples
          ? sample_period_words(gpu.power_sample_period_s()) +
                ", integrated (no lag; a window's value settles once the data covering its end is in)"
          : fmt::format("{} read every {:.0f} ms, integrated{}", gpu.power_reading_source(),
                        1e3 * options.interval_s,
                        gpu.power_reading_source() == "power usage"
                            ? " (the driver keeps no power samples; if power usage is a trailing mean, as on "
                              "Hopper, short windows across load changes are attributed late)"
                            : "");
  text += gpu.has_energy_counter() ? "; calibrated by the energy counter" : "; no energy counter to calibrate";
  if (energy_method_for(gpu, options) == GpuEnergyMethod::kPowerSamples && gpu.has_energy_counter() &&
      options.counter_interval_s > 0 && options.counter_anchors.enabled) {
    text += fmt::format("; windows pinned to the counter's steps around their edges where it steps regularly "
                        "(found at the first window; up to {:g} counter reads/s)",
                        options.counter_anchors.reads_per_s);
  } else if (gpu.has_energy_counter() && options.counter_interval_s > 0 && options.counter_anchors.enabled &&
             CounterAnchors::reads_at_edges(gpu.energy_counter_timing())) {
    text += fmt::format("; windows anchored on counter reads right after their edges where the counter moves "
                        "every few ms (measured at the first window; up to {:g} edges/s)",
                        options.counter_anchors.reads_per_s);
  }
  return text;
}

// The handle: everything forwards to the core.

Sampler::Sampler(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                 std::shared_ptr<const Clock> clock, SamplerOptions options)
    : core_(std::make_shared<SamplerCore>(std::move(gpus), std::move(cpu_zones), std::move(clock), options)) {}

Sampler::~Sampler() {
  try {
    core_->stop();
  } catch (const std::exception&) {
    // A failing timeline stream must not terminate the process from a
    // destructor; stop() called explicitly reports it.
  }
}

void Sampler::start() { core_->start(); }
void Sampler::stop() { core_->stop(); }
void Sampler::sample_now() { core_->sample_now(); }
EnergyEstimate Sampler::gpu_energy(std::size_t gpu, double begin_s, double end_s) const {
  return core_->gpu_energy(gpu, begin_s, end_s);
}
EnergyEstimate Sampler::cpu_energy(std::size_t zone, double begin_s, double end_s) const {
  return core_->cpu_energy(zone, begin_s, end_s);
}
void Sampler::energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                       std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted) const {
  core_->energies(begin_s, end_s, gpus, cpu_zones, end_just_noted);
}
std::vector<ObservedPower> Sampler::observed_power(std::size_t gpu, double begin_s, double end_s) const {
  return core_->observed_power(gpu, begin_s, end_s);
}
double Sampler::gpu_scale(std::size_t gpu) const { return core_->gpu_scale(gpu); }
GpuEnergyMethod Sampler::gpu_method(std::size_t gpu) const { return core_->gpu_method(gpu); }
std::string Sampler::gpu_method_description(std::size_t gpu) const { return core_->gpu_method_description(gpu); }
double Sampler::covered_until_s() const { return core_->covered_until_s(); }
bool Sampler::wait_settled(double begin_s, double end_s, double timeout_s) {
  return core_->wait_settled(begin_s, end_s, timeout_s);
}
void Sampler::note_window_edge(double time_s) { core_->note_window_edge(time_s); }
void Sampler::prepare_counter_anchors() { core_->prepare_counter_anchors(); }
void Sampler::poll_counter_anchors() { core_->poll_counter_anchors(); }
void Sampler::read_counter_every_step(bool on) { core_->read_counter_every_step(on); }
std::vector<CounterAnchor> Sampler::counter_values(std::size_t gpu, double begin_s, double end_s) const {
  return core_->counter_values(gpu, begin_s, end_s);
}
void Sampler::pin_history(double since_s) { core_->pin_history(since_s); }
Timeline& Sampler::timeline() { return core_->timeline(); }
const Timeline& Sampler::timeline() const { return core_->timeline(); }
SamplerStats Sampler::stats() const { return core_->stats(); }
const std::vector<std::shared_ptr<Gpu>>& Sampler::gpus() const { return core_->gpus(); }
const std::vector<std::shared_ptr<CpuEnergyZone>>& Sampler::cpu_zones() const { return core_->cpu_zones(); }
const SamplerOptions& Sampler::options() const { return core_->options(); }
const Clock& Sampler::clock() const { return core_->clock(); }
std::shared_ptr<const Clock> Sampler::shared_clock() const { return core_->shared_clock(); }

double sampling_interval_s(double interval_ms, const std::string& name) {
  if (!(interval_ms >= kMinSamplingIntervalMs && interval_ms <= kMaxSamplingIntervalMs)) {
    throw UsageError(fmt::format("{}: {} is outside [{}, {}] (milliseconds)", name, interval_ms,
                                 kMinSamplingIntervalMs, kMaxSamplingIntervalMs));
  }
  return interval_ms / 1000.0;
}

}  // namespace joule
