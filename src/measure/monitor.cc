// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "joule/error.h"

namespace joule {

double Measurement::gpu_total_energy_j() const {
  return std::accumulate(gpu_energy_j.begin(), gpu_energy_j.end(), 0.0);
}

double Measurement::cpu_total_energy_j() const {
  return std::accumulate(cpu_package_energy_j.begin(), cpu_package_energy_j.end(), 0.0) +
         std::accumulate(dram_energy_j.begin(), dram_energy_j.end(), 0.0);
}

double Measurement::total_energy_j() const { return gpu_total_energy_j() + cpu_total_energy_j(); }

Monitor::Monitor(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                 std::shared_ptr<const Clock> clock, MonitorOptions options)
    : clock_(clock),
      synchronize_(std::move(options.synchronize)),
      sampler_(std::move(gpus), std::move(cpu_zones), std::move(clock), options.sampler),
      history_s_(sampler_.options().history_s) {
  sampler_.start();
  // A monitor is made to open windows: find the counters' step grids now, so
  // that a window begun a moment after the monitor is pinned to counter steps
  // like the later ones. (Left to the first window, the grids came too late
  // for its beginning, and the first window kept the sample integral alone:
  // 0.2-0.6% low on two H200s right after a training burst, bench/README.md.)
  sampler_.prepare_counter_anchors();
}

Monitor::Monitor(const Devices& devices, MonitorOptions options)
    : Monitor(devices.gpus, devices.cpu_zones, SteadyClock::instance(), std::move(options)) {}

Monitor::~Monitor() { sampler_.stop(); }

void Monitor::stop() { sampler_.stop(); }

void Monitor::begin_window(const std::string& name) {
  if (synchronize_) synchronize_();
  const double now_s = clock_->now_s();
  std::lock_guard lock(mutex_);
  for (const auto& window : open_) {
    if (window.name == name) throw UsageError(fmt::format("measurement window '{}' is already open", name));
  }
  open_.push_back({name, now_s});
  // Beginning now moves the pin only when nothing was pinned, or when
  // another thread pinned a later time between our clock read and the lock.
  // (Older windows' pins expire when a window ends.)
  if (now_s < pinned_since_s_) repin_locked(now_s);
  sampler_.note_window_edge(now_s);
}

Measurement Monitor::end_window(const std::string& name) {
  if (synchronize_) synchronize_();
  const double end_s = clock_->now_s();
  double begin_s = 0.0;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(open_.begin(), open_.end(), [&](const OpenWindow& w) { return w.name == name; });
    if (it == open_.end() || it->closing) {
      throw UsageError(fmt::format("measurement window '{}' is not open", name));
    }
    begin_s = it->begin_s;
    it->closing = true;  // stays in open_ (pinning its history) until computed
  }
  sampler_.note_window_edge(end_s);
  Measurement m = compute(name, begin_s, end_s, /*end_just_noted=*/true);
  std::lock_guard lock(mutex_);
  open_.erase(std::find_if(open_.begin(), open_.end(), [&](const OpenWindow& w) { return w.name == name; }));
  remember_ended_locked(begin_s, end_s);
  repin_locked(end_s);
  return m;
}

Measurement Monitor::compute(const std::string& name, double begin_s, double end_s, bool end_just_noted) const {
  Measurement m;
  m.name = name;
  m.begin_s = begin_s;
  m.elapsed_s = end_s - begin_s;
  m.settled = true;
  auto take = [&](const EnergyEstimate& estimate) {
    if (estimate.problem) m.warnings.push_back(*estimate.problem);
    m.settled = m.settled && estimate.settled;
    return estimate.energy_j;
  };
  std::lock_guard lock(estimates_mutex_);
  std::vector<EnergyEstimate>& gpus = gpu_estimates_;
  std::vector<EnergyEstimate>& zones = zone_estimates_;
  sampler_.energies(begin_s, end_s, gpus, zones, end_just_noted);
  m.gpu_energy_j.reserve(gpus.size());
  m.gpu_sources.reserve(gpus.size());
  for (const EnergyEstimate& estimate : gpus) {
    m.gpu_energy_j.push_back(take(estimate));
    m.gpu_sources.push_back({estimate.method, estimate.scale, estimate.counter_anchored});
  }
  for (std::size_t i = 0; i < zones.size(); ++i) {
    const double energy_j = take(zones[i]);
    (sampler_.cpu_zones()[i]->domain() == CpuDomain::kPackage ? m.cpu_package_energy_j : m.dram_energy_j)
        .push_back(energy_j);
  }
  return m;
}

Measurement Monitor::settle(const Measurement& m, double timeout_s) {
  if (m.settled) return m;
  sampler_.wait_settled(m.begin_s, m.end_s(), timeout_s);
  return refresh(m);
}

Measurement Monitor::refresh(const Measurement& m) const { return compute(m.name, m.begin_s, m.end_s()); }

Measurement Monitor::end_window_settled(const std::string& name, double timeout_s) {
  return settle(end_window(name), timeout_s);
}

bool Monitor::window_open(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return std::any_of(open_.begin(), open_.end(), [&](const OpenWindow& w) { return w.name == name && !w.closing; });
}

void Monitor::remember_ended_locked(double begin_s, double end_s) {
  // Ends are kept in order (a window ended by another thread a moment
  // earlier may arrive second: it is kept as long as the one before it).
  EndedWindow ended{begin_s, end_s};
  if (!recently_ended_.empty()) ended.end_s = std::max(ended.end_s, recently_ended_.back().end_s);
  // A window that began no earlier than this one and ends no later can
  // never be the oldest beginning still pinned: drop it now.
  while (!recently_ended_.empty() && recently_ended_.back().begin_s >= ended.begin_s) recently_ended_.pop_back();
  recently_ended_.push_back(ended);
}

void Monitor::repin_locked(double now_s) {
  while (!recently_ended_.empty() && recently_ended_.front().end_s < now_s - history_s_) recently_ended_.pop_front();
  double oldest_s = recently_ended_.empty() ? std::numeric_limits<double>::infinity() : recently_ended_.front().begin_s;
  for (const auto& window : open_) oldest_s = std::min(oldest_s, window.begin_s);
  // An earlier pin, or none, at once; a later one only once it has moved
  // kRepinStepS: the sampler then keeps up to that much more history, and a
  // window per step does not write to the sampler's and the anchors' lines
  // at every edge.
  if (oldest_s == pinned_since_s_) return;
  if (std::isinf(oldest_s) || oldest_s < pinned_since_s_ || oldest_s >= pinned_since_s_ + kRepinStepS) {
    pinned_since_s_ = oldest_s;
    sampler_.pin_history(oldest_s);
  }
}

}  // namespace joule
