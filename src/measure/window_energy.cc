// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sampler's queries: a window's energy per device from the tracks (the
// calibrated power integral, pinned to the counter anchors around its
// edges where they are read), the power data for finer fits, how far the
// data reaches, and the method in words.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampler_core.h"

namespace joule::detail {

std::vector<ObservedPower> SamplerCore::observed_power(std::size_t gpu, double begin_s, double end_s) const {
  std::vector<ObservedPower> out;
  std::lock_guard lock(mutex_);
  const GpuTrack& track = gpu_tracks_.at(gpu);
  const auto& points = track.points;
  // The first point at or after begin_s: a sample there covers the span
  // from the point before it, which must not start before begin_s.
  auto it = std::lower_bound(points.begin(), points.end(), begin_s,
                             [](const PowerPoint& p, double t) { return p.time_s < t; });
  for (; it != points.end() && it->time_s <= end_s; ++it) {
    const double power_w = track.scale * it->power_w;
    if (it->segment == Segment::kLinear) {
      out.push_back({it->time_s, it->time_s, power_w});
    } else if (it != points.begin() && std::prev(it)->time_s >= begin_s) {
      out.push_back({std::prev(it)->time_s, it->time_s, power_w});
    }
  }
  return out;
}

EnergyEstimate SamplerCore::gpu_energy(std::size_t gpu, double begin_s, double end_s) const {
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  if (!anchors_) return gpu_energy_locked(gpu, begin_s, end_s, nullptr, hung);
  const AnchorLookups anchors = anchors_->window(gpu, begin_s, end_s);
  return gpu_energy_locked(gpu, begin_s, end_s, &anchors, hung);
}

EnergyEstimate SamplerCore::cpu_energy(std::size_t zone, double begin_s, double end_s) const {
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  return cpu_energy_locked(zone, begin_s, end_s, hung);
}

void SamplerCore::energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                       std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted) const {
  gpus.clear();
  cpu_zones.clear();
  bool end_pending_everywhere = end_just_noted && anchors_ != nullptr;
  for (std::size_t i = 0; end_pending_everywhere && i < gpu_tracks_.size(); ++i) {
    end_pending_everywhere = anchors_->awaits_reads(i);
  }
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  if (end_pending_everywhere) {
    for (std::size_t i = 0; i < gpu_tracks_.size(); ++i) {
      EnergyEstimate estimate = gpu_energy_locked(i, begin_s, end_s, nullptr, hung);
      if (!estimate.problem) estimate.settled = false;  // the end's reads are to come
      gpus.push_back(std::move(estimate));
    }
  } else {
    if (anchors_) anchors_->windows(begin_s, end_s, anchor_lookups_);
    for (std::size_t i = 0; i < gpu_tracks_.size(); ++i) {
      gpus.push_back(gpu_energy_locked(i, begin_s, end_s, anchors_ ? &anchor_lookups_[i] : nullptr, hung));
    }
  }
  for (std::size_t i = 0; i < cpu_tracks_.size(); ++i) cpu_zones.push_back(cpu_energy_locked(i, begin_s, end_s, hung));
}

EnergyEstimate SamplerCore::gpu_energy_locked(std::size_t gpu, double begin_s, double end_s,
                                              const AnchorLookups* anchors, const std::optional<HungCall>& hung) const {
  const GpuTrack& track = gpu_tracks_.at(gpu);
  EnergyEstimate estimate;
  estimate.scale = track.scale;
  estimate.method = track.method;
  estimate.needs_data_until_s = end_s;
  const double covered_s =
      track.points.empty() ? -std::numeric_limits<double>::infinity() : track.points.back().time_s;
  estimate.settled = covered_s >= end_s;
  if (track.failure && end_s > track.failed_at_s) {
    // Nothing is known past the failure: count up to the last good point.
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", gpus_[gpu]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
    end_s = track.points.empty() ? begin_s : std::min(end_s, covered_s);
    begin_s = std::min(begin_s, end_s);
    estimate.settled = true;  // nothing more will come
  } else if (track.trimmed && begin_s < track.points.front().time_s) {
    estimate.problem = fmt::format("{}: history before t={:.3f} s is no longer held (kept {:.0f} s after windows end)",
                                   gpus_[gpu]->label(), track.points.front().time_s - started_at_s_,
                                   options_.history_s);
  } else if (hung && !estimate.settled) {
    // The data that would settle it waits behind a hung call: say so.
    estimate.problem = hung_problem(gpus_[gpu]->label(), gpu, *hung, covered_s);
  }
  estimate.energy_j = scaled_integral_j(track, end_s) - scaled_integral_j(track, begin_s);
  if (anchors == nullptr || estimate.problem) return estimate;
  using Status = CounterAnchors::Status;
  const auto& [begin, end] = *anchors;
  if (begin.status == Status::kPending || end.status == Status::kPending) {
    estimate.settled = false;  // a counter read for an edge is still to come
    estimate.needs_data_until_s = std::max({end_s, begin.pending_until_s, end.pending_until_s});
    return estimate;
  }
  if (begin.status != Status::kReady || end.status != Status::kReady) return estimate;
  const AnchoredEnergy at_begin = anchored_energy(track, begin, begin_s);
  const AnchoredEnergy at_end = anchored_energy(track, end, end_s);
  // Both edges on the same anchors: the counter cancels, the samples remain.
  if (!at_begin.trusted || !at_end.trusted || at_begin.anchors_used == at_end.anchors_used) return estimate;
  estimate.energy_j = at_end.counter_j - at_begin.counter_j;
  estimate.needs_data_until_s = std::max(end_s, at_end.needs_data_until_s);
  estimate.settled = covered_s >= estimate.needs_data_until_s;
  estimate.counter_anchored = true;
  return estimate;
}

SamplerCore::AnchoredEnergy SamplerCore::anchored_energy(const GpuTrack& track, const CounterAnchors::Lookup& anchors,
                                                 double time_s) const {
  // From a step before the edge, the samples add the stretch up to it; from a
  // step after, they take the stretch back. A load change inside a stretch is
  // where samples err (each averages only part of its interval), so the side
  // whose samples vary least is used; with both steady, the counter's change
  // across the two steps is shared out in proportion to the samples.
  const auto error_bound_j = [&](double from_s, double to_s) {
    return power_range_w(track.points, from_s, to_s) * (to_s - from_s);
  };
  constexpr double kSteadyJ = 0.5;
  // Beyond what samples that miss a load switch inside the step can be off
  // by (a few joules on an H100), short of a whole step's energy.
  constexpr double kStepMismatchJ = 6.0;
  constexpr double kStepMismatchShare = 0.5;
  AnchoredEnergy result;
  const std::optional<CounterAnchor>& before = anchors.before;
  const std::optional<CounterAnchor>& after = anchors.after;
  // The sample integral at the edge and at each anchor's step, once each.
  const double at_edge_j = scaled_integral_j(track, time_s);
  const double at_before_j = before ? scaled_integral_j(track, before->step_s) : 0.0;
  const double at_after_j = after ? scaled_integral_j(track, after->step_s) : 0.0;
  const double from_before_j = before ? before->counter_j + (at_edge_j - at_before_j) : 0.0;
  const double from_after_j = after ? after->counter_j - (at_after_j - at_edge_j) : 0.0;
  if (before && after) {
    // The counter's change across the edge's step must be that step's energy
    // by the samples too: a read taken one step off (the grid wrong by more
    // than the margin) shows here as a whole step too much or too little.
    const double step_samples_j = at_after_j - at_before_j;
    const double step_counter_j = after->counter_j - before->counter_j;
    if (std::fabs(step_counter_j - step_samples_j) > kStepMismatchJ + kStepMismatchShare * step_samples_j) {
      result.trusted = false;
      return result;
    }
    const double bound_before_j = error_bound_j(before->step_s, time_s);
    const double bound_after_j = error_bound_j(time_s, after->step_s);
    result.needs_data_until_s = after->step_s;
    result.anchors_used = {before->step_s, after->step_s};
    if (bound_before_j <= kSteadyJ && bound_after_j <= kSteadyJ) {
      const double share = step_samples_j > 0 ? (at_edge_j - at_before_j) / step_samples_j : 0.0;
      result.counter_j = before->counter_j + share * (after->counter_j - before->counter_j);
    } else if (bound_before_j <= bound_after_j) {
      result.counter_j = from_before_j;
      result.anchors_used = {before->step_s, before->step_s};
    } else {
      result.counter_j = from_after_j;
      result.anchors_used = {after->step_s, after->step_s};
    }
  } else if (before) {
    result.counter_j = from_before_j;
    result.needs_data_until_s = time_s;
    result.anchors_used = {before->step_s, before->step_s};
  } else {
    result.counter_j = from_after_j;
    result.needs_data_until_s = after->step_s;
    result.anchors_used = {after->step_s, after->step_s};
  }
  return result;
}

EnergyEstimate SamplerCore::cpu_energy_locked(std::size_t zone, double begin_s, double end_s,
                                              const std::optional<HungCall>& hung) const {
  const CpuTrack& track = cpu_tracks_.at(zone);
  EnergyEstimate estimate;
  if (track.failure && end_s > track.failed_at_s) {
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", cpu_zones_[zone]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
  } else if (hung && (track.points.empty() || track.points.back().time_s < end_s)) {
    estimate.problem = hung_problem(cpu_zones_[zone]->label(), gpus_.size(), *hung,
                                    track.points.empty() ? started_at_s_ : track.points.back().time_s);
  }
  const auto& p = track.points;
  if (p.size() < 2) return estimate;
  auto energy_at = [&](double t) {
    // Linear between readings; past the ends, continue at the nearest rate.
    auto after = first_point_after(p, t);
    if (after == p.begin()) after = p.begin() + 1;
    if (after == p.end()) after = p.end() - 1;
    const CpuPoint& a = *(after - 1);
    const CpuPoint& b = *after;
    return a.energy_j + (b.energy_j - a.energy_j) * (t - a.time_s) / (b.time_s - a.time_s);
  };
  estimate.settled = track.failure.has_value() || p.back().time_s >= end_s;
  if (track.failure) end_s = std::min(end_s, p.back().time_s);
  estimate.energy_j = std::max(0.0, energy_at(end_s) - energy_at(std::min(begin_s, end_s)));
  return estimate;
}

double SamplerCore::gpu_scale(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpu_tracks_.at(gpu).scale;
}

GpuEnergyMethod SamplerCore::gpu_method(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpu_tracks_.at(gpu).method;
}

std::string SamplerCore::gpu_method_description(std::size_t gpu) const {
  const Gpu& device = *gpus_.at(gpu);
  std::lock_guard lock(mutex_);
  const GpuTrack& track = gpu_tracks_[gpu];
  std::string text = track.method == GpuEnergyMethod::kPowerSamples
                         ? sample_period_words(device.power_sample_period_s())
                         : fmt::format("{} read every {:.0f} ms", device.power_reading_source(),
                                       1e3 * options_.interval_s);
  if (!device.has_energy_counter() || options_.counter_interval_s <= 0) {
    text += ", no energy counter";
  } else if (track.counter_note) {
    text += ", " + *track.counter_note;
  } else if (track.counters.size() < 3) {
    // Said as a count, not "pending": read after a short run it is final.
    text += fmt::format(", not counter-calibrated ({} of the 3 counter readings calibration needs)",
                        track.counters.size());
  } else {
    text += fmt::format(", counter-calibrated x{:.4f}", track.scale);
  }
  if (track.method_note) text += "; " + *track.method_note;
  if (anchors_) {
    // Anchored, or no longer and why (a counter that failed or never stepped).
    const std::string note = anchors_->describe(gpu);
    if (anchors_->anchored(gpu) || note.find("windows not anchored:") == 0) text += "; " + note;
  }
  return text;
}

double SamplerCore::covered_until_s() const {
  std::lock_guard lock(mutex_);
  return covered_until_locked();
}

double SamplerCore::covered_until_locked() const {
  double covered_s = std::numeric_limits<double>::infinity();
  for (const auto& track : gpu_tracks_) {
    if (track.failure) continue;  // nothing more will come
    covered_s = std::min(covered_s, track.points.empty() ? -std::numeric_limits<double>::infinity()
                                                         : track.points.back().time_s);
  }
  for (const auto& track : cpu_tracks_) {
    if (track.failure) continue;
    covered_s = std::min(covered_s, track.points.empty() ? -std::numeric_limits<double>::infinity()
                                                         : track.points.back().time_s);
  }
  return covered_s;
}

}  // namespace joule::detail
