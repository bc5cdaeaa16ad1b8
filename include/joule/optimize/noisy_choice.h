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
  bool admissible = true;          // kMaxSlowdown: within the slowdown at the confidence
};

struct NoiseAwareOptions {
  double confidence = 0.95;  // of each move away from the baseline, all comparisons together
  // A difference smaller than this share of the cost is not worth measuring
  // for: candidates that cannot beat the choice by more stop being measured.
  double tolerance = 0.01;
};

struct NoiseAwareChoice {
  std::size_t chosen = 0;  // index into the candidates
  bool moved = false;      // chosen is not the baseline (on a significant difference)
  std::vector<CandidateEstimate> estimates;
  std::vector<std::size_t> open;  // worth measuring again, the baseline included when it is
  double t_critical = 0.0;        // the one-sided t quantile each comparison used
  double relative_sd = 0.0;       // pooled spread of a visit's mean cost around its candidate's mean
  bool stall_adjusted = false;    // the stall covariate was used (see above)
  std::string summary;            // the decision in words, with the confidence
};

// baseline: the candidate in force before profiling (what staying means).
// price_w: the Zeus cost's price of time (the largest limit times the GPUs).
// kMaxSlowdown counts time against the fastest candidate's mean, as
// choose_power_limit() does: a candidate is admissible when its time's upper
// bound is within max_slowdown of it.
// Throws UsageError for no candidates or a baseline out of range.
NoiseAwareChoice choose_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options = {});

// Quantiles, exposed for tests: the standard normal's, and Student's t with
// df degrees of freedom (Cornish-Fisher expansion; df >= 1).
double normal_quantile(double p);
double student_t_quantile(double p, double df);

}  // namespace joule
