#include "joule/analyze/sweep_analysis.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "joule/error.h"

namespace joule {

namespace {

std::optional<double> column_double(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, c);
}

template <typename Fn>
void query(const std::string& path, const char* sql, Fn&& row) {
  if (!std::filesystem::exists(path)) throw UsageError(fmt::format("no results store at '{}'", path));
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    throw UsageError(fmt::format("cannot open results store '{}': {}", path, why));
  }
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
    const std::string why = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw UsageError(fmt::format("'{}' is not a joule results store: {}", path, why));
  }
  while (sqlite3_step(s) == SQLITE_ROW) row(s);
  sqlite3_finalize(s);
  sqlite3_close(db);
}

double number(const std::map<std::string, std::string>& config, const std::string& key) {
  return std::stod(config.at(key));
}

std::map<std::string, std::string> without(std::map<std::string, std::string> config, const std::string& key) {
  config.erase(key);
  return config;
}

std::optional<double> mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  return summarize(values).mean;
}

}  // namespace

std::string config_label(const std::map<std::string, std::string>& config, const std::string& empty_text) {
  std::string out;
  for (const auto& [k, v] : config) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? empty_text : out;
}

std::string ConfigResult::label() const { return config_label(config, "(single configuration)"); }

std::vector<SweepRun> load_sweep_runs(const std::string& path) {
  std::vector<SweepRun> runs;
  query(path,
        "SELECT id, config, repeat, status, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j, epochs,"
        " gpu_util_mean, gpu_util_cv, mem_util_mean, mem_util_cv, samples, steps FROM runs ORDER BY id",
        [&](sqlite3_stmt* s) {
          SweepRun r;
          r.id = sqlite3_column_int64(s, 0);
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
          const auto config = nlohmann::json::parse(text ? text : "{}", nullptr, false);
          if (config.is_object()) {
            for (const auto& [k, v] : config.items()) r.config[k] = v.is_string() ? v.get<std::string>() : v.dump();
          }
          r.repeat = sqlite3_column_int(s, 2);
          r.status = reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
          r.elapsed_s = sqlite3_column_double(s, 4);
          r.gpu_energy_j = sqlite3_column_double(s, 5);
          r.cpu_energy_j = sqlite3_column_double(s, 6);
          r.dram_energy_j = sqlite3_column_double(s, 7);
          r.epochs = column_double(s, 8);
          r.gpu_util_mean = column_double(s, 9);
          r.gpu_util_cv = column_double(s, 10);
          r.mem_util_mean = column_double(s, 11);
          r.mem_util_cv = column_double(s, 12);
          r.samples = column_double(s, 13);
          r.steps = column_double(s, 14);
          runs.push_back(std::move(r));
        });
  return runs;
}

std::vector<PowerPoint> load_power_timelines(const std::string& path) {
  std::vector<PowerPoint> points;
  query(path, "SELECT run_id, time_s, device, power_w FROM timelines ORDER BY run_id, device, time_s",
        [&](sqlite3_stmt* s) {
          points.push_back({sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1),
                            reinterpret_cast<const char*>(sqlite3_column_text(s, 2)), sqlite3_column_double(s, 3)});
        });
  return points;
}

const GpuKnob* find_gpu_knob(const std::string& key) {
  for (const GpuKnob& knob : kGpuKnobs) {
    if (key == knob.key) return &knob;
  }
  return nullptr;
}

SweepAnalysis analyze_sweep(const std::vector<SweepRun>& runs, std::optional<double> max_power_w) {
  SweepAnalysis a;
  // Group successful runs by configuration, in first-seen order.
  std::vector<std::map<std::string, std::string>> order;
  std::map<std::map<std::string, std::string>, std::vector<const SweepRun*>> groups;
  std::map<std::map<std::string, std::string>, int> failures;
  for (const auto& r : runs) {
    if (!groups.count(r.config) && !failures.count(r.config)) order.push_back(r.config);
    if (r.status == "ok") {
      groups[r.config].push_back(&r);
    } else {
      ++failures[r.config];
    }
  }
  for (const auto& config : order) {
    ConfigResult c;
    c.config = config;
    c.failed = failures.count(config) ? failures[config] : 0;
    std::vector<double> t, e, gu, gcv, mu, mcv, samples_rate, updates_rate;
    for (const SweepRun* r : groups[config]) {
      const double gpu_hours = (r->config.count("gpus") ? number(r->config, "gpus") : 1.0) * r->elapsed_s / 3600.0;
      if (r->samples && gpu_hours > 0) samples_rate.push_back(*r->samples / gpu_hours);
      if (r->steps && gpu_hours > 0) updates_rate.push_back(*r->steps / gpu_hours);
      t.push_back(r->elapsed_s);
      e.push_back(r->total_energy_j());
      if (r->gpu_util_mean) gu.push_back(*r->gpu_util_mean);
      if (r->gpu_util_cv) gcv.push_back(*r->gpu_util_cv);
      if (r->mem_util_mean) mu.push_back(*r->mem_util_mean);
      if (r->mem_util_cv) mcv.push_back(*r->mem_util_cv);
    }
    c.time_s = summarize(t);
    c.energy_j = summarize(e);
    c.gpu_util_mean = mean_of(gu);
    c.gpu_util_cv = mean_of(gcv);
    c.mem_util_mean = mean_of(mu);
    c.mem_util_cv = mean_of(mcv);
    c.samples_per_gpu_hour = mean_of(samples_rate);
    c.updates_per_gpu_hour = mean_of(updates_rate);
    if (c.time_s.n > 0) a.configs.push_back(std::move(c));
  }
  if (a.configs.empty()) throw UsageError("no successful run to analyse");

  // Baselines: the same other settings with every knob at its largest value.
  std::map<std::string, double> largest;  // per knob the grid sets
  for (const GpuKnob& knob : kGpuKnobs) {
    if (!a.configs.front().config.count(knob.key)) continue;
    for (const auto& c : a.configs) largest[knob.key] = std::max(largest[knob.key], number(c.config, knob.key));
  }
  auto without_knobs = [&](std::map<std::string, std::string> config) {
    for (const auto& [key, value] : largest) config.erase(key);
    return config;
  };
  for (auto& c : a.configs) {
    for (std::size_t j = 0; j < a.configs.size(); ++j) {
      const auto& b = a.configs[j];
      const bool same_rest = without_knobs(b.config) == without_knobs(c.config);
      const bool at_max = std::all_of(largest.begin(), largest.end(),
                                      [&](const auto& knob) { return number(b.config, knob.first) == knob.second; });
      if (same_rest && at_max && (!largest.empty() || j == 0)) {
        c.baseline = j;
        c.trade_off = trade_off({c.time_s.mean, c.energy_j.mean}, {b.time_s.mean, b.energy_j.mean});
        break;
      }
    }
  }

  // Best configuration per metric (trade-off metrics need a baseline).
  auto best_by = [&](const std::string& name, auto score) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < a.configs.size(); ++i) {
      if (!a.configs[i].trade_off) continue;
      if (!best || score(a.configs[i]) < score(a.configs[*best])) best = i;
    }
    if (best) a.best[name] = *best;
  };
  best_by("time", [](const ConfigResult& c) { return c.time_s.mean; });
  best_by("energy", [](const ConfigResult& c) { return c.energy_j.mean; });
  best_by("gain_minus_loss", [](const ConfigResult& c) { return -c.trade_off->gain_minus_loss; });
  best_by("edp", [](const ConfigResult& c) { return c.trade_off->edp; });
  best_by("eds_1.5", [](const ConfigResult& c) { return c.trade_off->eds_1_5; });
  best_by("eds_2", [](const ConfigResult& c) { return c.trade_off->eds_2; });

  // Scaling with GPU count: per group of the other settings, t = a * N^-b on
  // time per epoch when runs report epochs, else time per run.
  if (a.configs.front().config.count("gpus")) {
    std::map<std::map<std::string, std::string>, std::pair<std::vector<double>, std::vector<double>>> by_group;
    for (const auto& r : runs) {
      if (r.status != "ok") continue;
      auto& [n, t] = by_group[without(r.config, "gpus")];
      n.push_back(number(r.config, "gpus"));
      t.push_back(r.epochs && *r.epochs > 0 ? r.elapsed_s / *r.epochs : r.elapsed_s);
    }
    for (const auto& [group, points] : by_group) {
      std::vector<double> distinct = points.first;
      std::sort(distinct.begin(), distinct.end());
      if (std::unique(distinct.begin(), distinct.end()) - distinct.begin() < 2) continue;
      a.scaling.push_back({config_label(group, "all"), fit_power_law(points.first, points.second)});
    }
    // Energy against GPU-hours, all successful runs.
    std::vector<double> gpu_hours, kwh;
    for (const auto& r : runs) {
      if (r.status != "ok") continue;
      gpu_hours.push_back(number(r.config, "gpus") * r.elapsed_s / 3600.0);
      kwh.push_back(r.total_energy_j() / 3.6e6);
    }
    std::vector<double> distinct = gpu_hours;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) - distinct.begin() >= 2) a.kwh_per_gpu_hour = fit_linear(gpu_hours, kwh);
  }

  std::vector<TimeEnergy> points;
  for (const auto& c : a.configs) points.push_back({c.time_s.mean, c.energy_j.mean});
  a.pareto = pareto_front(points);
  double gpus_max = 1;
  for (const auto& c : a.configs) {
    if (c.config.count("gpus")) gpus_max = std::max(gpus_max, number(c.config, "gpus"));
  }
  const auto limit = largest.find("power_limit");
  a.max_power_w = max_power_w.value_or(limit != largest.end() ? limit->second * gpus_max : 300.0 * gpus_max);
  for (double eta : {0.0, 0.25, 0.5, 0.75, 1.0}) a.eta_picks.emplace_back(eta, pick_for_eta(points, eta, a.max_power_w));
  return a;
}

std::string to_text(const SweepAnalysis& a) {
  std::string out = "configuration                              n   time s (sd)         energy J (sd)        "
                    "gain %  loss %  gain-loss  failed\n";
  for (const auto& c : a.configs) {
    out += fmt::format("{:<40} {:>2}  {:>9.3f} ({:>6.3f})  {:>11.1f} ({:>8.1f})  {:>6}  {:>6}  {:>9}  {:>6}\n",
                       c.label(), c.time_s.n, c.time_s.mean, c.time_s.stddev, c.energy_j.mean, c.energy_j.stddev,
                       c.trade_off ? fmt::format("{:.1f}", c.trade_off->energy_gain_percent) : "-",
                       c.trade_off ? fmt::format("{:.1f}", c.trade_off->performance_loss_percent) : "-",
                       c.trade_off ? fmt::format("{:.1f}", c.trade_off->gain_minus_loss) : "-", c.failed);
  }
  out += "\nbest configuration per metric:\n";
  for (const auto& [metric, i] : a.best) out += fmt::format("  {:<16} {}\n", metric, a.configs[i].label());
  if (!a.scaling.empty()) out += "\nscaling with GPU count (t = a * N^-b):\n";
  for (const auto& s : a.scaling) {
    out += fmt::format("  {:<38} a = {:.4g} +- {:.2g}, b = {:.3f} +- {:.3f}, R^2 = {:.4f}, n = {}\n", s.group, s.fit.a,
                       s.fit.a_se, s.fit.b, s.fit.b_se, s.fit.r_squared, s.fit.n);
  }
  if (a.kwh_per_gpu_hour) {
    out += fmt::format("\nenergy per GPU-hour: {:.4f} +- {:.4f} kWh (intercept {:.2g}, R^2 = {:.4f}, n = {})\n",
                       a.kwh_per_gpu_hour->slope, a.kwh_per_gpu_hour->slope_se, a.kwh_per_gpu_hour->intercept,
                       a.kwh_per_gpu_hour->r_squared, a.kwh_per_gpu_hour->n);
  }
  out += "\nenergy-time Pareto front (fastest first):\n";
  for (std::size_t i : a.pareto) {
    out += fmt::format("  {:<40} {:.3f} s  {:.1f} J\n", a.configs[i].label(), a.configs[i].time_s.mean,
                       a.configs[i].energy_j.mean);
  }
  out += fmt::format("\nchoice by eta (cost = eta*E + (1-eta)*{:.0f} W*T):\n", a.max_power_w);
  for (const auto& [eta, i] : a.eta_picks) out += fmt::format("  eta {:.2f}: {}\n", eta, a.configs[i].label());
  bool any_rate = false;
  for (const auto& c : a.configs) any_rate |= c.samples_per_gpu_hour.has_value();
  if (any_rate) {
    out += "\nthroughput per GPU-hour (from the counts runs report):\n";
    for (const auto& c : a.configs) {
      if (!c.samples_per_gpu_hour) continue;
      out += fmt::format("  {:<40} {:.4g} samples, {:.4g} gradient updates\n", c.label(), *c.samples_per_gpu_hour,
                         c.updates_per_gpu_hour.value_or(0));
    }
  }
  bool any_util = false;
  for (const auto& c : a.configs) any_util |= c.gpu_util_mean.has_value();
  if (any_util) {
    out += "\nutilisation (mean %, coefficient of variation):\n";
    for (const auto& c : a.configs) {
      if (!c.gpu_util_mean) continue;
      out += fmt::format("  {:<40} SM {:.1f} (CV {:.2f})  memory {:.1f} (CV {:.2f})\n", c.label(), *c.gpu_util_mean,
                         c.gpu_util_cv.value_or(0), c.mem_util_mean.value_or(0), c.mem_util_cv.value_or(0));
    }
  }
  return out;
}

nlohmann::json to_json(const SweepAnalysis& a) {
  nlohmann::json configs = nlohmann::json::array();
  for (const auto& c : a.configs) {
    nlohmann::json j = {{"config", c.config},          {"n", c.time_s.n},
                        {"time_s_mean", c.time_s.mean}, {"time_s_sd", c.time_s.stddev},
                        {"energy_j_mean", c.energy_j.mean}, {"energy_j_sd", c.energy_j.stddev},
                        {"failed", c.failed}};
    if (c.trade_off) {
      j["energy_gain_percent"] = c.trade_off->energy_gain_percent;
      j["performance_loss_percent"] = c.trade_off->performance_loss_percent;
      j["gain_minus_loss"] = c.trade_off->gain_minus_loss;
      j["edp"] = c.trade_off->edp;
      j["eds_1_5"] = c.trade_off->eds_1_5;
      j["eds_2"] = c.trade_off->eds_2;
    }
    if (c.gpu_util_mean) j["gpu_util_mean"] = *c.gpu_util_mean;
    if (c.samples_per_gpu_hour) j["samples_per_gpu_hour"] = *c.samples_per_gpu_hour;
    if (c.updates_per_gpu_hour) j["updates_per_gpu_hour"] = *c.updates_per_gpu_hour;
    configs.push_back(j);
  }
  nlohmann::json best = nlohmann::json::object();
  for (const auto& [metric, i] : a.best) best[metric] = a.configs[i].config;
  nlohmann::json scaling = nlohmann::json::array();
  for (const auto& s : a.scaling) {
    scaling.push_back({{"group", s.group}, {"a", s.fit.a}, {"a_se", s.fit.a_se}, {"b", s.fit.b}, {"b_se", s.fit.b_se},
                       {"r_squared", s.fit.r_squared}, {"n", s.fit.n}});
  }
  nlohmann::json eta = nlohmann::json::array();
  for (const auto& [value, i] : a.eta_picks) eta.push_back({{"eta", value}, {"config", a.configs[i].config}});
  nlohmann::json out = {{"configs", configs}, {"best", best}, {"scaling", scaling}, {"pareto", a.pareto},
                        {"eta_picks", eta}, {"max_power_w", a.max_power_w}};
  if (a.kwh_per_gpu_hour) {
    out["kwh_per_gpu_hour"] = {{"slope", a.kwh_per_gpu_hour->slope}, {"slope_se", a.kwh_per_gpu_hour->slope_se},
                               {"intercept", a.kwh_per_gpu_hour->intercept}, {"r_squared", a.kwh_per_gpu_hour->r_squared}};
  }
  return out;
}

}  // namespace joule
