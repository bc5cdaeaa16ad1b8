#include "joule/attribution/window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "joule/error.h"

namespace joule::attribution {

namespace {

// The observations with each sample's span cut to its last cover_s, on the
// window's own scale.
std::vector<PowerObservation> observations_of(const std::vector<ObservedPower>& observed, double begin_s,
                                              double cover_s) {
  std::vector<PowerObservation> out;
  out.reserve(observed.size());
  for (const ObservedPower& o : observed) {
    const double from_s = cover_s > 0 && o.end_s > o.begin_s ? std::max(o.begin_s, o.end_s - cover_s) : o.begin_s;
    out.push_back({from_s - begin_s, o.end_s - begin_s, o.power_w});
  }
  return out;
}

// The samples' typical interval (their median span), 0 without samples.
double sample_interval_s(const std::vector<ObservedPower>& observed) {
  std::vector<double> spans;
  for (const ObservedPower& o : observed) {
    if (o.end_s > o.begin_s) spans.push_back(o.end_s - o.begin_s);
  }
  if (spans.empty()) return 0.0;
  std::nth_element(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(spans.size() / 2), spans.end());
  return spans[spans.size() / 2];
}

}  // namespace

Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options,
                          SampleModel samples) {
  if (samples.cover_s && (!(*samples.cover_s >= 0.0) || !std::isfinite(*samples.cover_s))) {
    throw UsageError(fmt::format("sample cover {} s: must be 0 (the whole interval) or positive", *samples.cover_s));
  }
  const std::vector<ObservedPower> observed = sampler.observed_power(gpu, begin_s, end_s);
  std::vector<RegionInterval> intervals = regions.intervals_within(begin_s, end_s);
  for (RegionInterval& v : intervals) {
    v.begin_s -= begin_s;
    v.end_s -= begin_s;
  }
  const auto fit = [&](double cover_s, const AttributionOptions& with) {
    return attribute(observations_of(observed, begin_s, cover_s), intervals, regions.names(), 0.0, end_s - begin_s,
                     window_energy_j, with);
  };
  std::optional<double> cover_s = samples.cover_s;
  std::string chosen;
  if (!cover_s) {
    // Each whole millisecond up to the interval, fitted without intervals.
    const double interval_s = sample_interval_s(observed);
    AttributionOptions quick = options;
    quick.bootstrap_rounds = 0;
    double best_rms_w = std::numeric_limits<double>::infinity();
    cover_s = 0.0;
    for (int ms = 1; ms * 0.001 <= interval_s + 1e-9; ++ms) {
      const double rms_w = fit(ms * 0.001, quick).residual_rms_w;
      if (rms_w < best_rms_w) best_rms_w = rms_w, cover_s = ms * 0.001;
    }
    if (interval_s > 0) {
      chosen = fmt::format("samples taken to average their last {:.0f} ms (of {:.0f} ms between them): the least "
                           "residual of the covers tried",
                           1e3 * *cover_s, 1e3 * interval_s);
    }
  }
  Attribution result = fit(*cover_s, options);
  if (!chosen.empty()) result.notes.push_back(chosen);
  return result;
}

std::vector<Attribution> attribute_window(Monitor& monitor, const Measurement& settled, const RegionRecorder& regions,
                                          const AttributionOptions& options, SampleModel samples) {
  if (!settled.settled) {
    throw UsageError(fmt::format("window '{}' is not settled: settle it before attributing its energy", settled.name));
  }
  std::vector<Attribution> out;
  for (std::size_t gpu = 0; gpu < settled.gpu_energy_j.size(); ++gpu) {
    out.push_back(attribute_gpu(monitor.sampler(), gpu, regions, settled.begin_s, settled.end_s(),
                                settled.gpu_energy_j[gpu], options, samples));
  }
  return out;
}

}  // namespace joule::attribution
