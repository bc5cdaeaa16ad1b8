// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Choosing a setting (a power limit, a clock cap) from noisy measurements:
// each candidate's cost per step with an uncertainty, a move away from the
// baseline only on a difference that is significant at a stated confidence,
// and which candidates are still worth measuring.
//
// The measurements are stretches of consecutive training steps at one
// setting, grouped in visits: each visit applies the setting, warms up and
// measures. Real step times drift (input pipelines, Python, other tenants)
// over a second or two, so stretches of one visit are not independent, and
// one visit per candidate says nothing of its spread. The unit of evidence
// is therefore the visit's mean, and candidates are visited in rounds (every
// candidate once, then again): visits of one candidate are a round apart,
// independent of the drift. The spread of a visit's mean around its
// candidate's mean is pooled over all candidates (the noise is mostly the
// training loop's, whatever the GPU's setting), so two rounds already give
// as many degrees of freedom as there are candidates. Each candidate is then
// compared with the baseline by a one-sided t test, Bonferroni-corrected
// over the comparisons made.
//
// Where every stretch also says how long its fast steps took, a visit's
// stall (its time per step beyond them) is a covariate: the pooled
// regression of each visit's cost on its stall, within candidates, takes
// the stalls' share of the noise out (and puts every candidate at the same
// mean stall) before the spread is estimated, at the price of one degree of
// freedom. Stalls do not depend on the setting; a setting's own cost does
// not show in them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "joule/optimize/objective.h"

namespace joule {

// One stretch of steps at one setting.
struct StretchSample {
  double time_per_step_s = 0.0;
  double energy_per_step_j = 0.0;  // all GPUs
  int visit = 0;                   // stretches of one visit share this number
  // The time of the stretch's fast steps (a low quantile of its steps'
  // durations); 0: not known. What a step takes beyond them is stall (input
  // pipeline, Python), the loop's noise rather than the setting's cost.
  double fast_time_per_step_s = 0.0;
};

struct CandidateSamples {
  double setting = 0.0;  // e.g. the power limit in W
  std::vector<StretchSample> stretches;
};

struct CandidateEstimate {
  double setting = 0.0;
  std::size_t visits = 0;
  double time_per_step_s = 0.0;    // mean
  double energy_per_step_j = 0.0;  // mean
  double cost = 0.0;               // the objective's cost per step (mean)
  double cost_se = 0.0;            // its standard error
  double time_se = 0.0;            // the time's
  bool admissible = true;          // kMaxSlowdown: within the slowdown at the confidence
};

struct NoiseAwareOptions {
  double confidence = 0.95;  // of each move away from the baseline, all comparisons together
  // A difference smaller than this share of the cost is not worth measuring
  // for; kMaxSlowdown: also how far past max_slowdown a choice may be, at the
  // confidence, where noise cannot tell it apart (the bound itself is met by
  // the choice's estimate).
  double tolerance = 0.01;
  // Two stages: the share of 1 - confidence that screening may spend on
  // moving at once (what is left goes to the confirming test).
  double screening_share = 0.2;
};

struct NoiseAwareChoice {
  std::size_t chosen = 0;  // index into the candidates
  bool moved = false;      // chosen is not the baseline (on a significant difference)
  // Screening: false when the candidates in `confirm` are to be measured
  // again in fresh rounds and compared by confirm_with_noise.
  bool decided = true;
  std::vector<CandidateEstimate> estimates;  // every candidate (screening's, or the one-stage rule's)
  std::vector<std::size_t> open;     // one-stage rule: could still beat the choice by more than the tolerance
  std::vector<std::size_t> confirm;  // screening: what the confirming rounds visit (the baseline first), ascending
  std::size_t reference = 0;         // kMaxSlowdown: the fastest at screening, what the slowdown counts against
  // Confirming: the confirmed candidates' estimates from the confirming rounds alone.
  std::vector<CandidateEstimate> confirmed;
  double t_critical = 0.0;        // the one-sided t quantile of the deciding test(s)
  // The t quantile of the intervals around `estimates` (simultaneous over
  // all comparisons at the confidence, or at screening's share of it).
  double estimates_t_critical = 0.0;
  double relative_sd = 0.0;       // pooled spread of a visit's mean cost around its candidate's mean
  double degrees_of_freedom = 0.0;  // of that spread
  bool stall_adjusted = false;    // the stall covariate was used (see above)
  std::string summary;            // the decision in words, with the confidence
};

// The one-stage rule: every candidate against the baseline, Bonferroni over
// all comparisons.
// baseline: the candidate in force before profiling (what staying means).
// price_w: the Zeus cost's price of time (the largest limit times the GPUs).
// kMaxSlowdown counts time against the fastest candidate's mean, as
// choose_power_limit() does: a candidate is admissible when its time's upper
// bound is within max_slowdown of it.
// Throws UsageError for no candidates or a baseline out of range.
NoiseAwareChoice choose_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options = {});

// The two-stage rule. With many candidates, Bonferroni's correction makes
// every comparison so strict that a real gain of one or two percent never
// shows; testing the screening's best on the same data instead would pick
// noise (the winner's curse). So screening (a few rounds of every
// candidate) only picks a contender, and fresh confirming rounds of the
// contender and the baseline decide, with one test that the selection did
// not bias.
//
// screen_with_noise, after the screening rounds, decides at once when
// choose_with_noise at screening_share of the error rate moves and leaves
// nothing open (a clear winner), or when no candidate can beat the baseline
// by more than the tolerance even at the top of its interval (staying).
// Otherwise it lists in `confirm` the baseline and up to four others: the
// contender, the lowest cost after a running mean over each candidate and its
// neighbours in setting (costs vary smoothly with a setting; noise does not),
// and its two neighbours (the mean may shift a minimum by one setting), and
// the lowest cost as measured (a sharp minimum that the mean flattens).
// kMaxSlowdown: costs are energies, among candidates whose time, less one
// standard error, is within max_slowdown of the fastest candidate's mean (the
// reference, whose time the choice biases low), and the reference is
// confirmed too.
NoiseAwareChoice screen_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options = {});

// confirming: the candidates' samples from the confirming rounds only (the
// screening's stretches left out). The cheapest of the confirmed candidates
// on this fresh data is tested against the baseline (one one-sided t test,
// Bonferroni over the few it was chosen from) and chosen only when cheaper
// at the remaining confidence. kMaxSlowdown: only among those shown within
// the bound: the reference, and each other candidate whose time's estimate
// is within max_slowdown of the reference's and its upper bound within
// max_slowdown * (1 + tolerance) (Bonferroni over those tested); half the
// error rate goes to the time tests, half to the energy test.
NoiseAwareChoice confirm_with_noise(const std::vector<CandidateSamples>& confirming, std::size_t baseline,
                                    const NoiseAwareChoice& screening, const Objective& objective, double price_w,
                                    const NoiseAwareOptions& options = {});

// Quantiles, exposed for tests: the standard normal's, and Student's t with
// df degrees of freedom (Cornish-Fisher expansion; df >= 1).
double normal_quantile(double p);
double student_t_quantile(double p, double df);

}  // namespace joule
