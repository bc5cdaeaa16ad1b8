// The regions' energy over a measured window: the Sampler's power data for
// the window (measure/ stays the source), the recorder's intervals, and the
// window's exact energy per GPU, into attribute().
#pragma once

#include <optional>
#include <vector>

#include "joule/attribution/attribution.h"
#include "joule/attribution/regions.h"
#include "joule/measure/monitor.h"

namespace joule::attribution {

// How the driver's buffered samples average power: each over the last
// cover_s before its stamp (0: the whole interval since the sample before).
// It decides which regions an observation saw, so a wrong cover biases every
// region's power towards the mean. An H100's 20 ms samples seem to cover only
// their last ~10 ms (docs/measurement.md); the cover that fits best leaves the
// least residual (Attribution::residual_rms_w), which is how to find it.
//
// A sample may also come late: stamped delay_s after the end of the span it
// averages (the driver's filter, or its timestamps' offset from the host's
// clock). Unmodelled, it hands each region the power of the one before it,
// as an H200's samples still do with it (bench/README.md, section 16).
struct SampleModel {
  // None (the default): the cover is found, in whole milliseconds up to the
  // samples' interval, as the one whose fit leaves the least residual; the
  // result's notes say which.
  std::optional<double> cover_s;
  // None (the default): found the same way, in whole milliseconds from minus
  // half the samples' interval to one interval.
  std::optional<double> delay_s;
};

// One GPU's share of a window, by region. Times are on the window's own
// scale (seconds from its beginning: the fit's precision does not depend on
// how long the monitor has run).
Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options = {},
                          SampleModel samples = {});

// Every GPU of a window that ended on monitor; settle it first (Monitor::settle)
// so that its energy is final and the samples reach its end.
std::vector<Attribution> attribute_window(Monitor& monitor, const Measurement& settled, const RegionRecorder& regions,
                                          const AttributionOptions& options = {}, SampleModel samples = {});

}  // namespace joule::attribution
