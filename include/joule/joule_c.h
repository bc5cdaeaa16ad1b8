// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
/* A small C interface to joule's measurement and power-limit optimizer, for
 * training loops in other languages (ctypes, cffi). Every function that can
 * fail returns 0 on success and -1 on failure, with the message available
 * from joule_last_error() (per thread). */
#ifndef JOULE_JOULE_C_H_
#define JOULE_JOULE_C_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct joule_session joule_session;

/* Opens the devices joule finds (as `joule info` shows them), starts a
 * monitor, and, when options_json has "power_limit": {...}, a power-limit
 * optimizer. options_json (may be NULL or "{}"):
 *   {"interval_ms": 100, "gpus": [0, 1],
 *    "power_limit": {"objective": "cost", "eta": 0.5, "max_slowdown": 1.1,
 *                    "observer": true, "step_w": 25, "warmup_steps": 5,
 *                    "measure_steps": 20, "min_warmup_s": 1, "min_measure_s": 2,
 *                    "job": "name", "batch_size": 0, "profile_path": "",
 *                    "reprofile": false, "noise_aware": true, "screening_rounds": 3,
 *                    "confirming_rounds": 20, "stretches_per_visit": 2, "confidence": 0.95,
 *                    "knob": "power_limit", "step_mhz": 90, "min_clock_fraction": 0.5}}
 * ("knob": "sm_clock" or "memory_clock" turns clock caps instead of limits.)
 * "read_counter_every_step": true reads each GPU's energy counter once a
 * step for the session's life (~4% of a core on an H100), for
 * joule_attribute_window to fit. Returns NULL on failure. */
joule_session* joule_session_open(const char* options_json);
void joule_session_close(joule_session* session);

/* Measurement windows; joule_end_window writes a JSON object with name,
 * begin_s, elapsed_s, gpu_energy_j[], cpu_package_energy_j[], dram_energy_j[],
 * total_energy_j, warnings[], settled and gpu_sources[] ({method,
 * description, calibration_scale, counter_anchored} per GPU; anchored: the
 * window was pinned to energy-counter steps near its edges, the exact
 * method, which settles ~0.1 s after the end) into out (NUL-terminated,
 * truncated to out_len). It returns at once: "settled": false means the data
 * covering the window's last instants (the driver's power samples, ~20 ms
 * behind on an H100) had not arrived and the last power was carried forward.
 * joule_settle_window gives the final value of the most recently ended
 * window of that name, waiting up to timeout_s for it (0: just recompute
 * now, i.e. poll); joule_end_window_settled ends and settles in one call. */
int joule_begin_window(joule_session* session, const char* name);
int joule_end_window(joule_session* session, const char* name, char* out, size_t out_len);
int joule_settle_window(joule_session* session, const char* name, double timeout_s, char* out, size_t out_len);
int joule_end_window_settled(joule_session* session, const char* name, double timeout_s, char* out,
                             size_t out_len);

/* Regions of a training step, for per-region energy attribution
 * (docs/attribution.md): they nest (a region begun inside another pauses it);
 * joule_region_end must name the innermost open one. Edges are host instants:
 * synchronise the GPU first where they should be the GPU's. */
int joule_region_begin(joule_session* session, const char* name);
int joule_region_end(joule_session* session, const char* name);
/* The same at an instant measured elsewhere (a GPU timestamp mapped to this
 * clock, e.g. from CUDA events), in seconds on the clock joule_clock_s reads;
 * edges come in the order they happened (an earlier one than the last is an
 * error). */
int joule_region_begin_at(joule_session* session, const char* name, double time_s);
int joule_region_end_at(joule_session* session, const char* name, double time_s);
/* A concurrent region's call (work on another stream beside the step, e.g. an
 * all-reduce): its power adds to whatever runs. Its edges do not nest: they
 * may come in any order relative to the others, several calls of one region
 * may be open at once, and an end closes the earliest open call of the region
 * (it may not precede that call's beginning). A name is concurrent or nested,
 * not both. */
int joule_region_begin_concurrent_at(joule_session* session, const char* name, double time_s);
int joule_region_end_concurrent_at(joule_session* session, const char* name, double time_s);
/* The session's clock (windows and region edges), in seconds; -1 on error. */
int joule_clock_s(joule_session* session, double* now_s);
/* Splits the energy of the most recently ended window of that name, settled
 * (joule_end_window_settled, or joule_settle_window), among the regions, per
 * GPU: writes a JSON array with one object per GPU (regions[] with name,
 * concurrent, calls, gpu_time_s, resolved, power_w, power_above_baseline_w, energy_j,
 * energy_per_call_j, share, energy_low_j, energy_high_j, energy_std_j; then
 * baseline_w and its interval, baseline_estimated, baseline_separated,
 * idle_time_s, idle_energy_j, window_energy_j, model_energy_j, scale,
 * observations, residual_rms_w, power_ceiling_w (the GPU's highest power
 * limit, read from it: a region fitted above 1.25 times it gets a note and
 * an interval down to its time at the idle power),
 * notes[]; null where there is no estimate).
 * options_json (may be NULL): {"baseline_w": 90, "bootstrap_rounds": 200,
 * "confidence": 0.9, "block_s": 1.0, "seed": 1, "sample_cover_ms": 10,
 * "sample_delay_ms": 5} (without them the samples' cover, and how late
 * their stamps are, are found by the fit); or a measured response instead:
 * "sample_response_ms": [weights, newest first],
 * "sample_response_first_lag_ms": 9 (docs/attribution.md). The energy
 * counter's increments, where the session read it once a step (session
 * option "read_counter_every_step": true), are fitted with the samples:
 * "counter_increments": false leaves them out, "counter_lag_ms": 16 gives
 * how far the counter lags the work (without it, found by the fit). With a
 * measured response the intervals carry the model's own bias, 7.5% of each
 * region's energy (1 sigma) unless "model_bias" (a share, 0 to 1) says
 * otherwise; 0 leaves the statistical interval alone. */
int joule_attribute_window(joule_session* session, const char* window_name, const char* options_json, char* out,
                           size_t out_len);
/* Training-loop callbacks of the power-limit optimizer (no-ops without one). */
int joule_on_epoch_begin(joule_session* session);
int joule_on_step_begin(joule_session* session);
int joule_on_step_end(joule_session* session);
int joule_on_epoch_end(joule_session* session);

/* The optimizer's profile table and decision, as text. Returns 1 when the
 * profile is complete, 0 while profiling, -1 without an optimizer. */
int joule_power_limit_report(joule_session* session, char* out, size_t out_len);

const char* joule_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* JOULE_JOULE_C_H_ */
