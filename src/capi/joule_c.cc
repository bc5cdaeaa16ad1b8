// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/control/devices.h"
#include "joule/joule_c.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "joule/attribution/json.h"
#include "joule/attribution/window.h"
#include "joule/device/discovery.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

struct joule_session {
  joule::Devices devices;
  std::unique_ptr<joule::Monitor> monitor;
  std::unique_ptr<joule::PowerLimitOptimizer> optimizer;
  std::mutex ended_mutex;
  std::map<std::string, joule::Measurement> ended;  // last ended window per name, for joule_settle_window
  std::unique_ptr<joule::attribution::RegionRecorder> regions;  // made at the first region
};

namespace {

thread_local std::string g_last_error;

void copy_out(const std::string& text, char* out, size_t out_len) {
  if (out == nullptr || out_len == 0) return;
  const size_t n = std::min(text.size(), out_len - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

nlohmann::json to_json(const joule::Measurement& m, const joule::Sampler& sampler) {
  nlohmann::json sources = nlohmann::json::array();
  for (std::size_t i = 0; i < m.gpu_sources.size(); ++i) {
    sources.push_back({{"method", joule::to_string(m.gpu_sources[i].method)},
                       {"description", sampler.gpu_method_description(i)},
                       {"calibration_scale", m.gpu_sources[i].calibration_scale},
                       {"counter_anchored", m.gpu_sources[i].counter_anchored}});
  }
  return {{"name", m.name},
          {"begin_s", m.begin_s},
          {"elapsed_s", m.elapsed_s},
          {"gpu_energy_j", m.gpu_energy_j},
          {"cpu_package_energy_j", m.cpu_package_energy_j},
          {"dram_energy_j", m.dram_energy_j},
          {"total_energy_j", m.total_energy_j()},
          {"warnings", m.warnings},
          {"settled", m.settled},
          {"gpu_sources", sources}};
}

void remember_ended(joule_session* session, const joule::Measurement& m) {
  std::lock_guard lock(session->ended_mutex);
  session->ended[m.name] = m;
}

// The most recently ended window of that name (UsageError when none ended).
joule::Measurement last_ended(joule_session* session, const char* name) {
  std::lock_guard lock(session->ended_mutex);
  const auto it = session->ended.find(name);
  if (it == session->ended.end()) {
    throw joule::UsageError(std::string("no ended measurement window named '") + name + "'");
  }
  return it->second;
}

// An options argument: NULL or "" is no options.
nlohmann::json parse_options(const char* options_json) {
  return options_json == nullptr || *options_json == '\0' ? nlohmann::json::object()
                                                          : nlohmann::json::parse(options_json);
}

}  // namespace

extern "C" {

joule_session* joule_session_open(const char* options_json) {
  try {
    const nlohmann::json o = parse_options(options_json);
    auto session = std::make_unique<joule_session>();
    session->devices = joule::discover_devices();
    if (o.contains("gpus")) joule::select_gpus(session->devices, o["gpus"].get<std::vector<unsigned>>());
    joule::MonitorOptions monitor_options;
    monitor_options.sampler.interval_s = joule::sampling_interval_s(o.value("interval_ms", 100.0));
    session->monitor = std::make_unique<joule::Monitor>(session->devices, monitor_options);
    if (o.value("read_counter_every_step", false)) session->monitor->sampler().read_counter_every_step(true);
    if (o.contains("power_limit")) {
      const auto& p = o["power_limit"];
      joule::PowerLimitOptimizerOptions options;
      const joule::PowerLimitOptimizerOptions defaults;
      options.objective = joule::parse_objective(p.value("objective", std::string("cost")), p.value("eta", 0.5),
                                                 p.value("max_slowdown", 1.1));
      options.observer = p.value("observer", false);
      options.knob = joule::parse_optimizer_knob(p.value("knob", std::string("power_limit")));
      options.step_w = p.value("step_w", defaults.step_w);
      options.step_mhz = p.value("step_mhz", defaults.step_mhz);
      options.min_clock_fraction = p.value("min_clock_fraction", defaults.min_clock_fraction);
      options.warmup_steps = p.value("warmup_steps", defaults.warmup_steps);
      options.measure_steps = p.value("measure_steps", defaults.measure_steps);
      options.noise_aware = p.value("noise_aware", defaults.noise_aware);
      options.screening_rounds = p.value("screening_rounds", defaults.screening_rounds);
      options.confirming_rounds = p.value("confirming_rounds", defaults.confirming_rounds);
      options.stretches_per_visit = p.value("stretches_per_visit", defaults.stretches_per_visit);
      options.confidence = p.value("confidence", defaults.confidence);
      options.min_warmup_s = p.value("min_warmup_s", defaults.min_warmup_s);
      options.min_measure_s = p.value("min_measure_s", defaults.min_measure_s);
      options.job_name = p.value("job", std::string("job"));
      options.batch_size = p.value("batch_size", 0);
      options.profile_path = p.value("profile_path", std::string());
      options.reprofile = p.value("reprofile", false);
      session->optimizer = std::make_unique<joule::PowerLimitOptimizer>(*session->monitor, options);
    }
    return session.release();
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return nullptr;
  }
}

void joule_session_close(joule_session* session) {
  if (session == nullptr) return;
  session->optimizer.reset();  // restores limits before the monitor stops
  delete session;
}

int joule_begin_window(joule_session* session, const char* name) {
  return guarded([&] { session->monitor->begin_window(name); });
}

int joule_end_window(joule_session* session, const char* name, char* out, size_t out_len) {
  return guarded([&] {
    const joule::Measurement m = session->monitor->end_window(name);
    remember_ended(session, m);
    copy_out(to_json(m, session->monitor->sampler()).dump(), out, out_len);
  });
}

int joule_settle_window(joule_session* session, const char* name, double timeout_s, char* out, size_t out_len) {
  return guarded([&] {
    const joule::Measurement ended = last_ended(session, name);
    const joule::Measurement m =
        timeout_s > 0 ? session->monitor->settle(ended, timeout_s) : session->monitor->refresh(ended);
    if (m.settled) remember_ended(session, m);
    copy_out(to_json(m, session->monitor->sampler()).dump(), out, out_len);
  });
}

int joule_end_window_settled(joule_session* session, const char* name, double timeout_s, char* out,
                             size_t out_len) {
  return guarded([&] {
    const joule::Measurement m = session->monitor->end_window_settled(name, timeout_s);
    remember_ended(session, m);
    copy_out(to_json(m, session->monitor->sampler()).dump(), out, out_len);
  });
}

namespace {

joule::attribution::RegionRecorder& regions_of(joule_session* session) {
  if (!session->regions) {
    session->regions = std::make_unique<joule::attribution::RegionRecorder>(session->monitor->sampler().shared_clock());
  }
  return *session->regions;
}

joule::attribution::RegionRecorder& open_regions_of(joule_session* session, const char* name) {
  if (!session->regions) throw joule::UsageError(std::string("region '") + name + "' is not open");
  return *session->regions;
}

}  // namespace

int joule_region_begin(joule_session* session, const char* name) {
  return guarded([&] { regions_of(session).begin(name); });
}

int joule_region_end(joule_session* session, const char* name) {
  return guarded([&] { open_regions_of(session, name).end(name); });
}

int joule_region_begin_at(joule_session* session, const char* name, double time_s) {
  return guarded([&] { regions_of(session).begin_at(name, time_s); });
}

int joule_region_end_at(joule_session* session, const char* name, double time_s) {
  return guarded([&] { open_regions_of(session, name).end_at(name, time_s); });
}

int joule_region_begin_concurrent_at(joule_session* session, const char* name, double time_s) {
  return guarded([&] { regions_of(session).begin_concurrent_at(name, time_s); });
}

int joule_region_end_concurrent_at(joule_session* session, const char* name, double time_s) {
  return guarded([&] {
    if (!session->regions) throw joule::UsageError(std::string("concurrent region '") + name + "' has no open call to end");
    session->regions->end_concurrent_at(name, time_s);
  });
}

int joule_clock_s(joule_session* session, double* now_s) {
  return guarded([&] {
    if (now_s == nullptr) throw joule::UsageError("joule_clock_s: now_s is NULL");
    *now_s = session->monitor->sampler().clock().now_s();
  });
}

int joule_attribute_window(joule_session* session, const char* window_name, const char* options_json, char* out,
                           size_t out_len) {
  return guarded([&] {
    const joule::Measurement ended = last_ended(session, window_name);
    if (!session->regions) throw joule::UsageError("no region was recorded (joule_region_begin)");
    const nlohmann::json o = parse_options(options_json);
    joule::attribution::AttributionOptions options;
    if (o.contains("baseline_w")) options.baseline_w = o["baseline_w"].get<double>();
    options.bootstrap_rounds = o.value("bootstrap_rounds", options.bootstrap_rounds);
    options.confidence = o.value("confidence", options.confidence);
    options.block_s = o.value("block_s", options.block_s);
    options.seed = o.value("seed", options.seed);
    joule::attribution::SampleModel samples;
    if (o.contains("sample_cover_ms")) samples.cover_s = o["sample_cover_ms"].get<double>() / 1000.0;
    if (o.contains("sample_delay_ms")) samples.delay_s = o["sample_delay_ms"].get<double>() / 1000.0;
    if (o.contains("sample_response_ms")) {
      joule::attribution::SampleResponse response;
      response.response_ms = o["sample_response_ms"].get<std::vector<double>>();
      response.first_lag_ms = o.value("sample_response_first_lag_ms", 0);
      samples.response = std::move(response);
    }
    samples.counter_increments = o.value("counter_increments", samples.counter_increments);
    if (o.contains("counter_lag_ms")) samples.counter_lag_s = o["counter_lag_ms"].get<double>() / 1000.0;
    if (o.contains("model_bias")) samples.model_bias = o["model_bias"].get<double>();
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& a : joule::attribution::attribute_window(*session->monitor, ended, *session->regions, options,
                                                              samples)) {
      gpus.push_back(joule::attribution::to_json(a));
    }
    copy_out(gpus.dump(), out, out_len);
  });
}

#define JOULE_C_CALLBACK(name)                                            \
  int joule_##name(joule_session* session) {                              \
    return guarded([&] {                                                  \
      if (session->optimizer) session->optimizer->name();                 \
    });                                                                   \
  }
JOULE_C_CALLBACK(on_epoch_begin)
JOULE_C_CALLBACK(on_step_begin)
JOULE_C_CALLBACK(on_step_end)
JOULE_C_CALLBACK(on_epoch_end)
#undef JOULE_C_CALLBACK

int joule_power_limit_report(joule_session* session, char* out, size_t out_len) {
  if (!session->optimizer) return -1;
  copy_out(session->optimizer->report(), out, out_len);
  return session->optimizer->state() == joule::PowerLimitOptimizer::State::kDecided ? 1 : 0;
}

const char* joule_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
