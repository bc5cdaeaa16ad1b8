// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The regions' energy over a measured window: the Sampler's power data for
// the window (measure/ stays the source), the recorder's intervals, and the
// window's exact energy per GPU, into attribute().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "joule/attribution/attribution.h"
#include "joule/attribution/regions.h"
#include "joule/measure/monitor.h"

namespace joule::attribution {

// How a GPU's samples respond to its power, measured over a window in which
// the GPU alternated between two levels at random lengths: "high" (the
// region named) and anything else. Each sample is fitted as
//     power = low_w + sum_l c_l x (share of "high" in the l-th millisecond before its stamp)
// so c / sum(c) is the response lag by lag, whatever its shape, smoothed (a
// penalty on its second differences, its strength cross-validated); negative
// weights are dropped. Random lengths matter: with a periodic pattern, lags a
// period apart cannot be told apart.
struct SampleResponse {
  // Newest first, summing to 1: response_ms[i] weighs the millisecond
  // [stamp - (lag + 1) ms, stamp - lag ms], lag = first_lag_ms + i
  // (negative: after the stamp).
  std::vector<double> response_ms;
  int first_lag_ms = 0;
  double low_w = 0.0;   // the fit's power outside "high"
  double high_w = 0.0;  // and inside it
  double residual_rms_w = 0.0;
  std::size_t samples = 0;
  // The lags by which 10%, 50% and 90% of the response has come, in ms.
  double lag10_ms = 0.0, lag50_ms = 0.0, lag90_ms = 0.0;
  double smoothing = 0.0;  // the penalty cross-validation chose
  // The response refitted on block-bootstrap resamples of the samples, each
  // from rounds_first_lag_ms: attribution refits with each and widens every
  // region's interval by how far they move it (empty: no widening).
  std::vector<std::vector<double>> rounds;
  int rounds_first_lag_ms = 0;
  // Where it came from, for the attribution's note (a SampleResponseStore's
  // file); empty: measured in this process or given by hand.
  std::string source;
};
// Lags from min_lag_ms (negative: after the stamp) to max_lag_ms are fitted;
// the response is then cut to the lags holding all but 1% of it.
SampleResponse fit_sample_response(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions,
                                   const std::string& high_region, double begin_s, double end_s,
                                   int min_lag_ms = -20, int max_lag_ms = 60);
// The same over a window that ended on monitor, settled (Monitor::settle),
// on its GPU gpu; UsageError for an unsettled window or a GPU it lacks.
SampleResponse fit_sample_response(Monitor& monitor, const Measurement& settled, std::size_t gpu,
                                   const RegionRecorder& regions, const std::string& high_region,
                                   int min_lag_ms = -20, int max_lag_ms = 60);

// How the driver's buffered samples average power: each over the last
// cover_s before its stamp (0: the whole interval since the sample before).
// It decides which regions an observation saw, so a wrong cover biases every
// region's power towards the mean. An H100's 20 ms samples seem to cover only
// their last ~10 ms (docs/measurement.md); the cover that fits best leaves the
// least residual (Attribution::residual_rms_w), which is how to find it.
//
// A sample may also come late: stamped delay_s after the end of the span it
// averages (the driver's filter, or its timestamps' offset from the host's
// clock). Neither describes an H200's samples, which respond over ~3-39 ms
// before their stamp, unevenly: there a measured response (fit_sample_response)
// replaces both (bench/README.md section 16).
struct SampleModel {
  // None (the default): the cover is found, in whole milliseconds up to the
  // samples' interval, as the one whose fit leaves the least residual; the
  // result's notes say which.
  std::optional<double> cover_s;
  // None (the default): found the same way, in whole milliseconds from minus
  // half the samples' interval to one interval.
  std::optional<double> delay_s;
  // A measured response instead of a boxcar (cover_s and delay_s unset then).
  std::optional<SampleResponse> response;
  // The energy counter's increments within the window, where the sampler
  // read it once a step (Sampler::read_counter_every_step), are fitted with
  // the samples: exact integrals over ~100 ms, each weighted against the
  // samples by the inverse square of its own kind's residual. Fewer than
  // three values read: the samples alone.
  bool counter_increments = true;
  // How long after the work the counter counts it (it integrates the power
  // as the GPU senses it). None: found in whole milliseconds from
  // kMinCounterLagMs to kMaxCounterLagMs, as the lag whose counter-only fit
  // leaves the least residual.
  std::optional<double> counter_lag_s;
  // With a measured response: the model's own bias (one constant power per
  // region, while a GPU's power moves within regions and regions change each
  // other's power), as a standard deviation relative to each region's energy,
  // added in quadrature to its statistical interval. The window's own data do
  // not show it; proof runs against leave-one-out truths do. None:
  // kProofModelBias; 0: the statistical interval alone. Not applied with a
  // boxcar, whose bias on a real GPU is far larger and not calibrated.
  std::optional<double> model_bias;
};
inline constexpr int kMinCounterLagMs = -10;
inline constexpr int kMaxCounterLagMs = 60;
// The model bias pooled over the proof runs on an H100 and an H200 (regions
// with >= 5% of the energy; bench/README.md section 16f).
inline constexpr double kProofModelBias = 0.075;

// One GPU's share of a window, by region. Times are on the window's own
// scale (seconds from its beginning: the fit's precision does not depend on
// how long the monitor has run).
Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options = {},
                          SampleModel samples = {});

// The same from the data themselves (what attribute_gpu reads from a
// sampler; e.g. kept from a run for refitting offline), on one clock: the
// samples as Sampler::observed_power gives them, the counter's values as
// Sampler::counter_values does (empty: none), the regions' intervals cut to
// [begin_s, end_s] here, each naming one of names.
Attribution attribute_observed(const std::vector<ObservedPower>& observed,
                               const std::vector<CounterAnchor>& counter_values,
                               std::vector<RegionInterval> intervals, const std::vector<std::string>& names,
                               double begin_s, double end_s, double window_energy_j,
                               const AttributionOptions& options = {}, SampleModel samples = {});

// Every GPU of a window that ended on monitor; settle it first (Monitor::settle)
// so that its energy is final and the samples reach its end.
std::vector<Attribution> attribute_window(Monitor& monitor, const Measurement& settled, const RegionRecorder& regions,
                                          const AttributionOptions& options = {}, SampleModel samples = {});

}  // namespace joule::attribution
