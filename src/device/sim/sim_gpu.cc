// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "joule/error.h"

namespace joule {

namespace {

SimGpuModel::MeasuredPoint interpolate(const std::map<uint32_t, SimGpuModel::MeasuredPoint>& table, double limit_w) {
  const auto limit_mw = static_cast<uint32_t>(std::lround(limit_w * 1000.0));
  auto above = table.lower_bound(limit_mw);
  if (above == table.end()) return std::prev(above)->second;
  if (above->first == limit_mw || above == table.begin()) return above->second;
  const auto below = std::prev(above);
  const double f = static_cast<double>(limit_mw - below->first) / static_cast<double>(above->first - below->first);
  return {below->second.power_w + f * (above->second.power_w - below->second.power_w),
          below->second.relative_speed + f * (above->second.relative_speed - below->second.relative_speed)};
}

}  // namespace

namespace {

// The part of the dynamic power that a memory clock cap leaves, and the SM
// clock fraction a cap allows (1 when uncapped).
double memory_power_factor(const SimGpuModel& m, const SimGpuModel::Settings& s) {
  if (s.memory_cap_mhz == 0) return 1.0;
  const double fraction = std::min(1.0, s.memory_cap_mhz / static_cast<double>(m.memory_clock_mhz));
  return 1.0 - m.memory_power_fraction * (1.0 - fraction);
}

double sm_cap_fraction(const SimGpuModel& m, const SimGpuModel::Settings& s) {
  if (s.sm_cap_mhz == 0) return 1.0;
  return std::min(1.0, s.sm_cap_mhz / static_cast<double>(m.max_sm_clock_mhz));
}

}  // namespace

double SimGpuModel::sm_clock_fraction(double load, const Settings& s) const {
  const double cap = sm_cap_fraction(*this, s);
  if (!measured.empty()) {
    // A measured speed may exceed 1 (a table's noise); only a cap bounds it.
    const double speed = interpolate(measured, s.limit_w).relative_speed;
    return s.sm_cap_mhz == 0 ? speed : std::min(speed, cap);
  }
  const double demand_w = idle_power_w + std::clamp(load, 0.0, 1.0) * (full_load_power_w - idle_power_w);
  const double wanted_dynamic_w = (demand_w - idle_power_w) * memory_power_factor(*this, s);
  if (wanted_dynamic_w <= 0.0 || idle_power_w + wanted_dynamic_w <= s.limit_w) return cap;
  // The limit binds: dynamic power ~ clock^3, so the clock is the cube root of the power allowed.
  const double allowed = std::max(s.limit_w - idle_power_w, 0.0) / wanted_dynamic_w;
  return std::min(std::max(std::cbrt(allowed), 1e-3), cap);
}

double SimGpuModel::power_w(double load, const Settings& s) const {
  const double clock = sm_clock_fraction(load, s);
  if (!measured.empty()) {
    const auto point = interpolate(measured, s.limit_w);
    const double slowed = point.relative_speed > 0.0 ? clock / point.relative_speed : 1.0;
    const double full_w = idle_power_w + (point.power_w - idle_power_w) * std::pow(slowed, 3.0) *
                                             memory_power_factor(*this, s);
    return idle_power_w + std::clamp(load, 0.0, 1.0) * (full_w - idle_power_w);
  }
  const double demand_w = idle_power_w + std::clamp(load, 0.0, 1.0) * (full_load_power_w - idle_power_w);
  const double dynamic_w = (demand_w - idle_power_w) * memory_power_factor(*this, s) * std::pow(clock, 3.0);
  return std::min(idle_power_w + dynamic_w, s.limit_w);
}

bool SimGpuModel::power_capped(double load, const Settings& s) const {
  // A limit the load's demand never reaches (a measured table's draw goes no
  // higher than at its largest limit).
  Settings unlimited = s;
  unlimited.limit_w = std::max(full_load_power_w, max_limit_mw / 1000.0);
  constexpr double kCapToleranceW = 1e-6;
  return power_w(load, s) < power_w(load, unlimited) - kCapToleranceW;
}

double SimGpuModel::relative_speed(double load, const Settings& s) const {
  const double demand_w = idle_power_w + std::clamp(load, 0.0, 1.0) * (full_load_power_w - idle_power_w);
  // An idle GPU is not slowed by a limit (nothing to run), only by a clock cap.
  const double clock = measured.empty() && demand_w <= idle_power_w ? sm_cap_fraction(*this, s)
                                                                      : sm_clock_fraction(load, s);
  double memory_stretch = 0.0;
  if (s.memory_cap_mhz != 0) {
    const double fraction = std::min(1.0, s.memory_cap_mhz / static_cast<double>(memory_clock_mhz));
    memory_stretch = memory_bound_fraction * (1.0 / fraction - 1.0);
  }
  return 1.0 / (1.0 / clock + memory_stretch);
}

std::vector<uint32_t> SimGpuModel::supported_clocks_mhz(ClockDomain domain) const {
  std::vector<uint32_t> clocks;
  if (domain == ClockDomain::kMemory) {
    clocks = lower_memory_clocks_mhz;
    clocks.push_back(memory_clock_mhz);
  } else {
    for (uint32_t mhz = min_sm_clock_mhz; mhz < max_sm_clock_mhz; mhz += std::max(sm_clock_step_mhz, 1u)) {
      clocks.push_back(mhz);
    }
    clocks.push_back(max_sm_clock_mhz);
  }
  std::sort(clocks.begin(), clocks.end());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  return clocks;
}

SimGpu::SimGpu(unsigned index, SimGpuModel model, std::shared_ptr<const Clock> clock)
    : index_(index),
      model_(std::move(model)),
      clock_(std::move(clock)),
      accounted_until_s_(clock_->now_s()),
      sampled_until_s_(accounted_until_s_),
      limit_mw_(model_.default_limit_mw) {}

std::string SimGpu::uuid() const { return fmt::format("SIM-{:08x}-0000-0000-0000-{:012x}", index_, index_); }

// One bus per GPU, as on a typical 8-GPU server.
std::string SimGpu::pci_bus_id() const { return fmt::format("00000000:{:02X}:00.0", 0x18 + index_); }

void SimGpu::advance_locked() const {
  const double now_s = clock_->now_s();
  if (now_s > accounted_until_s_) {
    energy_j_ += model_.power_w(load_, settings_locked()) * (now_s - accounted_until_s_);
    accounted_until_s_ = now_s;
  }
}

double SimGpu::energy_j() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return energy_j_;
}

void SimGpu::begin_change_locked() {
  advance_locked();
  if (!model_.keeps_power_samples) return;
  if (model_.power_sample_period_s > 0) {
    close_periods_locked();
  } else {
    close_sample_locked();
  }
}

// Ends the buffered sample at the energy accounted so far: a sample never
// spans a change of load or settings, so it is the exact mean over its span.
void SimGpu::close_sample_locked() {
  if (accounted_until_s_ > sampled_until_s_) push_sample_locked(accounted_until_s_, energy_j_);
}

// Ends every sampling period that has passed. Each change first ends the
// periods before it, so the power has been the current one since the last
// period ended: the energy at each later end is the energy accounted so far
// less that power over the time since.
void SimGpu::close_periods_locked() {
  const double period_s = model_.power_sample_period_s;
  const double power_w = model_.power_w(load_, settings_locked());
  // The grid's index of the next end (the small margin keeps a period that
  // just ended from ending again through rounding).
  auto next = static_cast<int64_t>(std::floor(sampled_until_s_ / period_s + 1e-9)) + 1;
  const auto last = static_cast<int64_t>(std::floor(accounted_until_s_ / period_s));
  // Unread for long: only the newest periods fit the buffer, all at this power.
  if (const int64_t first_kept = last - static_cast<int64_t>(kMaxBufferedSamples) + 1; next < first_kept) {
    const double dropped_until_s = static_cast<double>(first_kept - 1) * period_s;
    sampled_until_s_ = dropped_until_s;
    sampled_energy_j_ = energy_j_ - power_w * (accounted_until_s_ - dropped_until_s);
    next = first_kept;
  }
  for (int64_t i = next; i <= last; ++i) {
    const double end_s = static_cast<double>(i) * period_s;
    push_sample_locked(end_s, energy_j_ - power_w * (accounted_until_s_ - end_s));
  }
}

// A sample from the end of the last one to end_s, where the energy was energy_j.
void SimGpu::push_sample_locked(double end_s, double energy_j) {
  if (end_s > sampled_until_s_) {
    const double mean_w = (energy_j - sampled_energy_j_) / (end_s - sampled_until_s_);
    samples_.push_back({clock_->to_realtime_us(end_s), static_cast<uint32_t>(std::lround(mean_w * 1000.0))});
    if (samples_.size() > kMaxBufferedSamples) samples_.pop_front();  // a driver's buffer is a ring too
  }
  sampled_until_s_ = end_s;
  sampled_energy_j_ = energy_j;
}

void SimGpu::read_power_samples(std::vector<PowerSample>& out) {
  if (!model_.keeps_power_samples) return Gpu::read_power_samples(out);
  std::lock_guard lock(mutex_);
  begin_change_locked();
  out.insert(out.end(), samples_.begin(), samples_.end());
  samples_.clear();
}

uint64_t SimGpu::total_energy_mj() { return static_cast<uint64_t>(energy_j() * 1000.0); }

uint32_t SimGpu::power_mw() {
  std::lock_guard lock(mutex_);
  return static_cast<uint32_t>(std::lround(model_.power_w(load_, settings_locked()) * 1000.0));
}

uint32_t SimGpu::power_limit_mw() {
  std::lock_guard lock(mutex_);
  return limit_mw_;
}

PowerLimitRange SimGpu::power_limit_range_mw() { return {model_.min_limit_mw, model_.max_limit_mw}; }

Utilization SimGpu::utilization() {
  std::lock_guard lock(mutex_);
  const auto percent = static_cast<uint32_t>(std::lround(load_ * 100.0));
  return {percent, percent / 2};
}

SimGpuModel::Settings SimGpu::settings_locked() const {
  return {limit_mw_ / 1000.0, sm_lock_ ? sm_lock_->max_mhz : 0u, memory_lock_ ? memory_lock_->max_mhz : 0u};
}

uint32_t SimGpu::sm_clock_mhz() {
  std::lock_guard lock(mutex_);
  return static_cast<uint32_t>(std::lround(model_.max_sm_clock_mhz * model_.sm_clock_fraction(load_, settings_locked())));
}

uint32_t SimGpu::memory_clock_mhz() {
  std::lock_guard lock(mutex_);
  return memory_lock_ ? std::min(memory_lock_->max_mhz, model_.memory_clock_mhz) : model_.memory_clock_mhz;
}

std::vector<uint32_t> SimGpu::supported_clocks_mhz(ClockDomain domain) { return model_.supported_clocks_mhz(domain); }

std::optional<ClockLock> SimGpu::clock_lock_mhz(ClockDomain domain) {
  std::lock_guard lock(mutex_);
  return domain == ClockDomain::kSm ? sm_lock_ : memory_lock_;
}

void SimGpu::lock_clock_mhz(ClockDomain domain, ClockLock clocks) {
  check_clock_lock_in_range(*this, domain, clocks, supported_clocks_mhz(domain));
  std::lock_guard lock(mutex_);
  begin_change_locked();
  (domain == ClockDomain::kSm ? sm_lock_ : memory_lock_) = clocks;
}

void SimGpu::reset_clock_lock(ClockDomain domain) {
  std::lock_guard lock(mutex_);
  begin_change_locked();
  (domain == ClockDomain::kSm ? sm_lock_ : memory_lock_).reset();
}

bool SimGpu::at_power_cap() {
  std::lock_guard lock(mutex_);
  return model_.power_capped(load_, settings_locked());
}

uint32_t SimGpu::temperature_c() { return static_cast<uint32_t>(std::lround(30.0 + power_mw() / 1000.0 * 0.08)); }

void SimGpu::set_power_limit_mw(uint32_t limit_mw) {
  check_power_limit_in_range(*this, limit_mw, power_limit_range_mw());
  std::lock_guard lock(mutex_);
  begin_change_locked();
  limit_mw_ = limit_mw;
}

void SimGpu::set_load(double load) {
  if (!(load >= 0.0 && load <= 1.0)) {
    throw UsageError(fmt::format("gpu{}: simulated load {} is outside [0, 1]", index_, load));
  }
  std::lock_guard lock(mutex_);
  begin_change_locked();
  load_ = load;
}

double SimGpu::load() const {
  std::lock_guard lock(mutex_);
  return load_;
}

double SimGpu::relative_speed() const {
  std::lock_guard lock(mutex_);
  return model_.relative_speed(load_, settings_locked());
}

std::vector<GpuProcess> SimGpu::running_processes() {
  std::lock_guard lock(mutex_);
  return processes_;
}

ProcessUtilizationSamples SimGpu::process_utilization(uint64_t since_unix_us) {
  const auto now_us = static_cast<uint64_t>(clock_->now_s() * 1e6);
  std::lock_guard lock(mutex_);
  ProcessUtilizationSamples out;
  if (now_us <= since_unix_us || process_sm_percent_.empty()) return out;
  for (const auto& [pid, percent] : process_sm_percent_) out.processes.push_back({pid, percent, 1});
  out.newest_unix_us = now_us;
  return out;
}

void SimGpu::set_process_utilization(std::map<uint32_t, double> sm_percent) {
  std::lock_guard lock(mutex_);
  process_sm_percent_ = std::move(sm_percent);
}

void SimGpu::set_processes(std::vector<GpuProcess> processes) {
  std::sort(processes.begin(), processes.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  std::lock_guard lock(mutex_);
  processes_ = std::move(processes);
}

std::vector<CapabilityStatus> SimGpu::probe_capabilities() {
  std::vector<CapabilityStatus> result;
  for (GpuCapability capability : kAllGpuCapabilities) {
    const bool available = capability != GpuCapability::kInstantPower;
    result.push_back({capability, available, available ? "" : "not supported: the simulation has one power reading"});
  }
  return result;
}

namespace {

double parse_number(const std::string& key, const std::string& value) {
  try {
    std::size_t used = 0;
    const double number = std::stod(value, &used);
    if (used == value.size() && std::isfinite(number)) return number;
  } catch (const std::exception&) {
  }
  throw UsageError(fmt::format("simulated GPU spec: '{}={}' is not a number", key, value));
}

uint32_t parse_watts_as_mw(const std::string& key, const std::string& value) {
  const double watts = parse_number(key, value);
  if (watts <= 0 || watts > 100'000) {
    throw UsageError(fmt::format("simulated GPU spec: '{}={}' must be a positive number of watts", key, value));
  }
  return static_cast<uint32_t>(std::lround(watts * 1000.0));
}

}  // namespace

SimSpec parse_sim_spec(const std::string& text) {
  SimSpec spec;
  bool default_given = false;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw UsageError(fmt::format("simulated GPU spec: '{}' is not key=value", item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "count") {
      const double count = parse_number(key, value);
      if (count < 1 || count > 64 || count != std::floor(count)) {
        throw UsageError(fmt::format("simulated GPU spec: count={} must be a whole number from 1 to 64", value));
      }
      spec.count = static_cast<unsigned>(count);
    } else if (key == "load") {
      spec.load = parse_number(key, value);
      if (spec.load < 0 || spec.load > 1) {
        throw UsageError(fmt::format("simulated GPU spec: load={} must lie in [0, 1]", value));
      }
    } else if (key == "name") {
      spec.model.name = value;
    } else if (key == "idle_w") {
      spec.model.idle_power_w = parse_watts_as_mw(key, value) / 1000.0;
    } else if (key == "full_w") {
      spec.model.full_load_power_w = parse_watts_as_mw(key, value) / 1000.0;
    } else if (key == "min_w") {
      spec.model.min_limit_mw = parse_watts_as_mw(key, value);
    } else if (key == "max_w") {
      spec.model.max_limit_mw = parse_watts_as_mw(key, value);
    } else if (key == "sample_ms") {
      const double ms = parse_number(key, value);
      if (!(ms > 0 && ms <= 1000)) {
        throw UsageError(fmt::format("simulated GPU spec: sample_ms={} must lie in (0, 1000] ms", value));
      }
      spec.model.keeps_power_samples = true;
      spec.model.power_sample_period_s = ms / 1000.0;
    } else if (key == "default_w") {
      spec.model.default_limit_mw = parse_watts_as_mw(key, value);
      default_given = true;
    } else {
      throw UsageError(fmt::format(
          "simulated GPU spec: unknown key '{}' (known: count, load, name, idle_w, full_w, min_w, max_w, default_w, "
          "sample_ms)",
          key));
    }
  }
  if (!default_given) spec.model.default_limit_mw = spec.model.max_limit_mw;  // GPUs ship at their largest limit
  const auto& m = spec.model;
  if (!(m.min_limit_mw <= m.default_limit_mw && m.default_limit_mw <= m.max_limit_mw)) {
    throw UsageError("simulated GPU spec: limits must satisfy min_w <= default_w <= max_w");
  }
  if (m.idle_power_w > m.full_load_power_w) {
    throw UsageError("simulated GPU spec: idle_w must not exceed full_w");
  }
  return spec;
}

}  // namespace joule
