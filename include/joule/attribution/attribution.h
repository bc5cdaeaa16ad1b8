// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Energy attribution: how much of a training window's GPU energy each region
// of the step used (a layer's forward or backward, the optimizer step, data
// loading, ...), from power data far coarser than the regions.
//
// An H100 reports power samples every ~20 ms and an energy counter that steps
// every 100 ms, while regions last microseconds to milliseconds. But training
// repeats the same step thousands of times and its phase drifts against the
// sampling, so every observation sees a different mix of regions. The model:
//
//     power(t) = b * [no exclusive region runs at t] + sum_r q_r * [region r runs at t]
//                + sum_c a_c * [concurrent region c runs at t]
//
// (q_r: exclusive region r's absolute power, baseline included; b: the idle
// power; a_c: the power concurrent region c adds while it runs, whatever else
// runs: a DDP all-reduce on its own stream during backward). An observation's
// mean power over a span is then linear in the unknowns, each coefficient the
// share of the span a region (or no exclusive region) ran; a point sample's
// coefficients are the indicators at its instant. Weighted least squares over
// all observations gives q_r, a_c and b. Written with absolute powers rather
// than powers above b, the idle column is zero when exclusive regions cover
// all time, and whether b is identified is the same question as for any
// region. A concurrent region that always runs exactly with one exclusive
// region (or always in the same proportion) is collinear with it, and neither
// gets an estimate.
//
// What the data cannot tell apart gets no estimate rather than a made-up one:
// a region no observation overlaps, regions always seen in the same proportion
// (collinear columns), the baseline when no idle time was observed (give
// AttributionOptions::baseline_w, or the powers are absolute and the baseline
// is not separated). The normal equations are solved through the
// eigendecomposition of their unit-diagonal form: an unknown with a component
// along a direction of eigenvalue ~0 is not determined by the data; the
// others are, and the pseudo-inverse solution is the unique estimate for them.
//
// Uncertainty: block bootstrap. Observations are cut into blocks of block_s
// (power errors are correlated over a driver's averaging window), blocks are
// drawn with replacement and the fit repeated. Each block's normal-equation
// sums are kept, so a round is a weighted sum of them and one k x k solve.
// Each round's energies are scaled to the window's energy like the estimate's,
// so the interval is that of the reported number (percentiles of the rounds).
//
// Energies: region r's is q_r x its GPU time, concurrent region c's a_c x its
// time (the union of its calls), the idle energy b x the time no exclusive
// region ran; they sum to what the model integrates to over the window, and
// every part is scaled by window_energy_j / that, so the parts sum to the
// window's measured (counter-anchored) energy. A scale far from 1 says the
// model and the observations disagree with the counter.
//
// Cost (n observations, m intervals, k = regions + 1, B blocks): sorting, a
// sweep in O(n + m + overlaps), B x k^2/2 doubles of block sums, and
// bootstrap_rounds x (B x k^2/2 + k^3) for the intervals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace joule::attribution {

// When one region ran once, on the sampler's clock. Intervals of different
// exclusive regions must not overlap (leaf regions; the caller resolves nested
// regions into exclusive parts). An interval is [begin_s, end_s).
struct RegionInterval {
  std::size_t region = 0;  // index into the region names
  double begin_s = 0.0;
  double end_s = 0.0;
  // The same call of the region resumed (after a region nested in it ran):
  // its time counts, not as another call.
  bool resumed = false;
  // A concurrent region (work on another stream: an all-reduce): its
  // intervals may overlap anything, its own other calls included (they count
  // as one while any runs), and its power adds to what runs. All of a
  // region's intervals must agree on this.
  bool concurrent = false;
};

// One power observation: the mean power over [begin_s, end_s] (an energy
// counter's increment over its span, or a sample the driver averaged over a
// span), or, when begin_s == end_s, the power at that instant.
struct PowerObservation {
  double begin_s = 0.0;
  double end_s = 0.0;
  double power_w = 0.0;
  double weight = 1.0;  // relative inverse variance
  // An energy counter's increment: the plain mean over its span, which
  // AttributionOptions::span_profile (a sample's response) does not weigh.
  bool counter = false;
};

// Regions named together: reported as one (AttributionOptions::totals: a
// module's forward and its backward, their sum's interval from the same
// bootstrap rounds as the parts', joule/attribution/totals.h), or fitted
// with one power (AttributionOptions::same_power: modules that do the same
// work, such as a transformer's identical blocks).
struct RegionGroup {
  std::string name;
  std::vector<std::string> regions;
};
using RegionTotal = RegionGroup;

struct AttributionOptions {
  // The idle power, where known (measured before the loop). Without it, it is
  // estimated where the data identify it (time with no region running was
  // observed, at least 1% of the window: slivers between back-to-back
  // regions would make it take up the model's error), else not separated:
  // power_w is absolute, the baseline 0, and a note says so.
  std::optional<double> baseline_w;
  int bootstrap_rounds = 200;  // 0: no intervals
  double confidence = 0.9;     // of the reported interval
  // The bootstrap resamples blocks of observations this long: power errors
  // are correlated over a driver's averaging window, so single observations
  // are not independent.
  double block_s = 1.0;
  std::uint64_t seed = 1;
  // How every observation with a span weighs it: equal slices of the span,
  // oldest first, each with its weight (summing to 1), for a driver whose
  // samples respond to power unevenly over their span
  // (SampleModel::response_ms). Empty: the plain mean over the span.
  std::vector<double> span_profile;
  std::vector<RegionTotal> totals;
  // Each group's regions share one unknown, the power while any of them runs;
  // each keeps its own time, calls and energy (its time at that power). For
  // regions the samples cannot tell apart one by one, neighbours in time far
  // shorter than a sample: a GPT's 8 blocks err by a fixed +-8% pattern each
  // on its own, 2.9% in the median as one (bench/README.md section 16k).
  // Exclusive regions only; a region is in one group at most.
  std::vector<RegionGroup> same_power;
  // The most this GPU can draw beyond transients: its highest settable power
  // limit. A region fitted above kImplausiblePowerMultiple times it is a figure the
  // fit could not separate from its neighbours, not a draw: a note says so
  // and its interval (and its totals') reaches down to its time at the idle
  // power. None: not checked; attribute_window reads it from each GPU.
  std::optional<double> power_ceiling_w;
};
// How far above the GPU's power ceiling a region's fitted power is taken as
// the fit's, not the GPU's: power excursions above the limit last
// microseconds, a region's calls add up to milliseconds and more.
inline constexpr double kImplausiblePowerMultiple = 1.25;
// From this share of a window's samples at the power cap on, the limiter
// decides how the step's power is spread: leaving a region out lets it spread
// the power anew (bench/README.md sections 16n and 16o).
inline constexpr double kMostlyCappedShare = 0.5;

struct RegionEnergy {
  std::string name;
  bool concurrent = false;  // its intervals were concurrent (RegionInterval::concurrent)
  std::size_t calls = 0;
  double gpu_time_s = 0.0;  // concurrent: the time any of its calls ran
  // false: the data do not determine this region's power (never observed,
  // collinear with others, or it did not run); the powers and the interval
  // are NaN, and energy_j counts its time at the baseline power (0 W when the
  // baseline is not separated; a concurrent region's 0 J: its time is counted
  // in what it overlaps) so that the parts still sum; a note says why.
  bool resolved = false;
  // Exclusive: the mean power while it runs, baseline included (the fit's),
  // and that less the baseline. Concurrent: both are the power it adds to
  // whatever runs with it (a_c; it has no level of its own).
  double power_w = 0.0;
  double power_above_baseline_w = 0.0;
  double energy_j = 0.0;                // power_w x gpu_time_s x the scale
  double energy_per_call_j = 0.0;
  double share = 0.0;  // of the window's energy
  // The confidence interval (bootstrap percentiles) and the rounds' standard
  // deviation; NaN where not computed (a note says why).
  double energy_low_j = 0.0;
  double energy_high_j = 0.0;
  double energy_std_j = 0.0;
};

struct Attribution {
  std::vector<RegionEnergy> regions;  // in the order of the region names
  // AttributionOptions::totals, in their order: calls the most of its
  // parts', power_w the mean over their time, resolved where every part is.
  std::vector<RegionEnergy> totals;
  double baseline_w = 0.0;
  // Where fitted, its confidence interval (bootstrap percentiles); else NaN.
  double baseline_low_w = 0.0;
  double baseline_high_w = 0.0;
  bool baseline_estimated = false;  // fitted (not given)
  bool baseline_separated = false;  // given or fitted; false: powers absolute, baseline 0
  double idle_time_s = 0.0;         // the window's time with no exclusive region running
  double idle_energy_j = 0.0;       // at the baseline power, scaled
  double window_energy_j = 0.0;     // the measured energy the parts sum to
  double model_energy_j = 0.0;      // what the fit integrates to over the window
  double scale = 1.0;               // window_energy_j / model_energy_j
  std::size_t observations = 0;
  double residual_rms_w = 0.0;  // weighted, of the observations around the fit
  // The GPU's highest power limit the regions' powers were checked against
  // (AttributionOptions::power_ceiling_w); NaN: not checked.
  double power_ceiling_w = std::numeric_limits<double>::quiet_NaN();
  // The share of the window's samples taken while the power limit held the
  // GPU's clocks down (SampledFields::power_cap); NaN: the state was not read.
  // Set by attribute_window; from kMostlyCappedShare on, a note says that a
  // region's figure is what it drew, not what leaving it out saves.
  double power_capped_share = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::string> notes;
  // The power came from a simulated GPU (joule's model, not a measurement):
  // set by attribute_window from the monitor's GPU, said on every output.
  bool simulated = false;
};

// Fits the power of each region over [window_begin_s, window_end_s] and splits
// window_energy_j, the window's exact (counter-anchored) energy, among them
// and the idle time. Throws UsageError naming what is wrong: overlapping
// exclusive intervals (which two), a region both concurrent and not, no observations, fewer observations than unknowns,
// non-finite values, intervals or observations outside the window, an
// unknown region index, a total naming an unknown region, bad options.
Attribution attribute(std::span<const PowerObservation> observations, std::span<const RegionInterval> intervals,
                      std::span<const std::string> region_names, double window_begin_s, double window_end_s,
                      double window_energy_j, const AttributionOptions& options = {});

}  // namespace joule::attribution
