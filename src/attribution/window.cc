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

// The observations with each sample's span cut to its last cover_s and moved
// delay_s earlier, on the window's own scale.
std::vector<PowerObservation> observations_of(const std::vector<ObservedPower>& observed, double begin_s,
                                              double cover_s, double delay_s) {
  std::vector<PowerObservation> out;
  out.reserve(observed.size());
  for (const ObservedPower& o : observed) {
    const double from_s = cover_s > 0 && o.end_s > o.begin_s ? std::max(o.begin_s, o.end_s - cover_s) : o.begin_s;
    out.push_back({from_s - delay_s - begin_s, o.end_s - delay_s - begin_s, o.power_w});
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

// The (cover, delay) in whole milliseconds, each in its range (a range of
// one value: given), whose fit leaves the least residual. Every pair is
// tried: with a right model the residual has a sharp minimum that a coarser
// grid steps over.
template <typename Fit>
std::pair<int, int> least_residual_ms(std::pair<int, int> covers, std::pair<int, int> delays, Fit&& fit) {
  std::pair<int, int> best{covers.first, delays.first};
  double best_rms_w = std::numeric_limits<double>::infinity();
  for (int c = covers.first; c <= covers.second; ++c) {
    for (int d = delays.first; d <= delays.second; ++d) {
      const double rms_w = fit(c, d);
      if (rms_w < best_rms_w) best_rms_w = rms_w, best = {c, d};
    }
  }
  return best;
}

}  // namespace

Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options,
                          SampleModel samples) {
  if (samples.cover_s && (!(*samples.cover_s >= 0.0) || !std::isfinite(*samples.cover_s))) {
    throw UsageError(fmt::format("sample cover {} s: must be 0 (the whole interval) or positive", *samples.cover_s));
  }
  if (samples.delay_s && !std::isfinite(*samples.delay_s)) {
    throw UsageError(fmt::format("sample delay {} s: must be finite", *samples.delay_s));
  }
  const std::vector<ObservedPower> observed = sampler.observed_power(gpu, begin_s, end_s);
  std::vector<RegionInterval> intervals = regions.intervals_within(begin_s, end_s);
  for (RegionInterval& v : intervals) {
    v.begin_s -= begin_s;
    v.end_s -= begin_s;
  }
  const auto fit = [&](double cover_s, double delay_s, const AttributionOptions& with) {
    // A sample moved past the window's edge by its delay saw time whose
    // regions are not known here: only the ones inside count.
    std::vector<PowerObservation> inside = observations_of(observed, begin_s, cover_s, delay_s);
    std::erase_if(inside, [&](const PowerObservation& o) { return o.begin_s < 0.0 || o.end_s > end_s - begin_s; });
    return attribute(inside, intervals, regions.names(), 0.0, end_s - begin_s, window_energy_j, with);
  };
  double cover_s = samples.cover_s.value_or(0.0);
  double delay_s = samples.delay_s.value_or(0.0);
  std::string chosen;
  const double interval_s = sample_interval_s(observed);
  const int interval_ms = static_cast<int>(std::floor(1e3 * interval_s + 1e-6));
  if ((!samples.cover_s || !samples.delay_s) && interval_ms >= 1) {
    // Whole milliseconds, each fitted without intervals.
    AttributionOptions quick = options;
    quick.bootstrap_rounds = 0;
    const auto ms_or = [](const std::optional<double>& given_s, int first_ms, int last_ms) {
      if (!given_s) return std::pair{first_ms, last_ms};
      const int ms = static_cast<int>(std::lround(1e3 * *given_s));
      return std::pair{ms, ms};
    };
    const auto [cover_ms, delay_ms] = least_residual_ms(
        ms_or(samples.cover_s, 1, interval_ms), ms_or(samples.delay_s, -interval_ms / 2, interval_ms),
        [&](int c, int d) { return fit(c * 1e-3, d * 1e-3, quick).residual_rms_w; });
    if (!samples.cover_s) cover_s = cover_ms * 1e-3;
    if (!samples.delay_s) delay_s = delay_ms * 1e-3;
    chosen = fmt::format("samples taken to average their last {:.0f} ms (of {:.0f} ms between them), stamped {:.0f} "
                         "ms after it: the least residual of the {} tried",
                         1e3 * cover_s, 1e3 * interval_s, 1e3 * delay_s,
                         samples.cover_s ? "delays" : samples.delay_s ? "covers" : "covers and delays");
  }
  Attribution result = fit(cover_s, delay_s, options);
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
