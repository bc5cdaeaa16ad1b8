#include "joule/attribution/window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "joule/error.h"

namespace joule::attribution {

Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options,
                          SampleModel samples) {
  if (!(samples.cover_s >= 0.0) || !std::isfinite(samples.cover_s)) {
    throw UsageError(fmt::format("sample cover {} s: must be 0 (the whole interval) or positive", samples.cover_s));
  }
  std::vector<PowerObservation> observations;
  for (const ObservedPower& o : sampler.observed_power(gpu, begin_s, end_s)) {
    const double from_s = samples.cover_s > 0 && o.end_s > o.begin_s ? std::max(o.begin_s, o.end_s - samples.cover_s)
                                                                     : o.begin_s;
    observations.push_back({from_s - begin_s, o.end_s - begin_s, o.power_w});
  }
  std::vector<RegionInterval> intervals = regions.intervals_within(begin_s, end_s);
  for (RegionInterval& v : intervals) {
    v.begin_s -= begin_s;
    v.end_s -= begin_s;
  }
  return attribute(observations, intervals, regions.names(), 0.0, end_s - begin_s, window_energy_j, options);
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
