// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// How a GPU's buffered power samples respond to its power, and what a window
// edge inside an energy-counter step takes from it.
//
// A window pinned to counter steps (counter_anchors.h) knows the energy of
// the step around each edge exactly; what it must guess is how that energy
// fell on either side of the edge. Read linearly, each sample is the mean
// power since the one before. An H200's samples are not: a sample stamped t
// weighs the power 7-60 ms before t, half of it by 16 ms (measured with
// attribution's fit_sample_response, docs/attribution.md), so a load change
// shows in the samples ~15 ms after it happened, and the linear reading puts
// that much of the change's energy on the wrong side of an edge: joules, a
// few percent of a window of a few tenths of a second.
//
// With the response known, the power over the step and its surroundings is
// reconstructed from the samples around it: every sample is the response-
// weighted mean of unknown power in 4 ms bins, the step's energy is the
// counter's, and among the powers that fit both the smoothest is taken
// (least squares with a small penalty on differences between neighbouring
// bins). The edge's share of the step is that power's integral up to it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace joule {

struct PowerSampleResponse {
  // Newest first, summing to 1: weights_ms[i] weighs the millisecond
  // [stamp - (lag + 1) ms, stamp - lag ms], lag = first_lag_ms + i (negative:
  // after the stamp). The stamps are the sampler's (joule's sample offset
  // applied), as attribution's SampleResponse measures them.
  std::vector<double> weights_ms;
  int first_lag_ms = 0;
  std::string source;  // where it was measured, in words (the method's description says it)
};

// UsageError naming what is wrong: no weights or more than 1000, a weight
// negative or not finite, none positive, lags outside [-1000, 1000] ms.
void check_sample_response(const PowerSampleResponse& response);

// The response joule ships for this GPU model and driver, if any: measured
// on that model with a driver of the same branch (its major version).
std::optional<PowerSampleResponse> builtin_sample_response(const std::string& gpu_name,
                                                           const std::string& driver_version);

// One buffered power sample: its stamp and power (calibrated).
struct StampedPower {
  double time_s = 0.0;
  double power_w = 0.0;
};

// The counter step (step_begin_s, step_end_s] with its energy, and the
// samples around it (oldest first; at least those whose response reaches
// into the step, see response_reach_s).
struct CounterStep {
  double begin_s = 0.0;
  double end_s = 0.0;
  double energy_j = 0.0;
};

// The share of the step's energy spent before edge_s, in [0, 1]; nullopt
// where the samples do not cover the step (a gap longer than 3 sample
// intervals, or fewer than 3 samples reaching into it).
std::optional<double> step_share_before(std::span<const StampedPower> samples, const PowerSampleResponse& response,
                                        const CounterStep& step, double edge_s);

// The stamps of the samples whose response reaches into [begin_s, end_s]:
// from begin_s + the newest lag to end_s + the oldest lag (+1 ms).
struct SampleReach {
  double first_stamp_s = 0.0;
  double last_stamp_s = 0.0;
};
SampleReach response_reach_s(const PowerSampleResponse& response, double begin_s, double end_s);

}  // namespace joule
