// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/sweep_analysis.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule {

namespace {

std::optional<double> column_double(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, c);
}

// A results store opened read only (analysis never changes it; a store of
// an earlier joule is read as it is, without the newer columns and tables).
class ReadOnlyStore {
 public:
  explicit ReadOnlyStore(const std::string& path) : path_(path) {
    require_results_store_file(path);
    // A file that is there but cannot be read as a store is a data error
    // (exit 1), not a usage error.
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "cannot open";
      sqlite3_close(db_);
      throw Error(fmt::format("cannot open results store '{}': {}", path, why));
    }
  }
  ~ReadOnlyStore() { sqlite3_close(db_); }
  ReadOnlyStore(const ReadOnlyStore&) = delete;
  ReadOnlyStore& operator=(const ReadOnlyStore&) = delete;

  template <typename Fn>
  void each(const std::string& sql, Fn&& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      throw Error(fmt::format("'{}' is not a joule results store: {}", path_, sqlite3_errmsg(db_)));
    }
    int rc = SQLITE_ROW;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) row(s);
    if (rc != SQLITE_DONE) {  // a store damaged past its first pages
      const std::string why = sqlite3_errmsg(db_);
      sqlite3_finalize(s);
      throw Error(fmt::format("results store '{}' cannot be read: {}", path_, why));
    }
    sqlite3_finalize(s);
  }
  bool has_column(const std::string& table, const std::string& column) {
    bool found = false;
    each("PRAGMA table_info(" + table + ")", [&](sqlite3_stmt* s) {
      const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
      found = found || (name && column == name);
    });
    return found;
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// Stored text as the analysis shows it: SQLite keeps whatever bytes were
// written, and the JSON output cannot hold invalid UTF-8 (dump() throws), so
// such text is shown escaped (printable) rather than ending the analysis.
std::string column_text(sqlite3_stmt* s, int c) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
  if (text == nullptr) return "";
  const std::string_view bytes(text, static_cast<std::size_t>(sqlite3_column_bytes(s, c)));
  return valid_utf8_or_printable(bytes);
}

// A stored number as the store holds it: SQLite is dynamically typed, so a
// REAL column may hold text ('abc'), which sqlite3_column_double reads as 0.
struct StoredNumber {
  std::optional<double> value;  // none: NULL or not a number
  std::string shown;            // what the store holds, for messages: "'abc'", "NULL", "inf"
  bool is_number() const { return value.has_value(); }
};

StoredNumber stored_number(sqlite3_stmt* s, int c) {
  switch (sqlite3_column_type(s, c)) {
    case SQLITE_INTEGER:
    case SQLITE_FLOAT: {
      const double x = sqlite3_column_double(s, c);
      return {x, fmt::format("{}", x)};
    }
    case SQLITE_NULL: return {std::nullopt, "NULL"};
    case SQLITE_BLOB: return {std::nullopt, fmt::format("a blob of {} bytes", sqlite3_column_bytes(s, c))};
    default: return {std::nullopt, fmt::format("'{}'", column_text(s, c))};
  }
}

// Why a run is damaged, collected while its rows are read: the first value
// found wrong ("gpu_energy_j = 'abc'") and what it should have been.
struct RowDamage {
  std::string value, wanted;
  void note(const std::string& column, const StoredNumber& n, const char* should_be) {
    if (!value.empty()) return;
    value = fmt::format("{} = {}", column, n.shown);
    wanted = should_be;
  }
};

// A measured quantity (time, energy): finite and >= 0 (> 0 for elapsed_s).
// NULL reads as 0 here; for a finished run it is damage (a sweep writes them all).
double measured(sqlite3_stmt* s, int c, const std::string& column, bool finished, RowDamage& damage) {
  const StoredNumber n = stored_number(s, c);
  const bool positive = column == "elapsed_s";
  const char* wanted = positive ? "a finite positive number" : "a finite number >= 0";
  if (!n.is_number()) {
    if (finished) damage.note(column, n, wanted);
    return 0.0;
  }
  if (finished && !(std::isfinite(*n.value) && (positive ? *n.value > 0 : *n.value >= 0))) damage.note(column, n, wanted);
  return *n.value;
}

// An optional statistic (epochs, utilisation, samples): NULL when absent;
// when present, a finite number >= 0.
std::optional<double> statistic(sqlite3_stmt* s, int c, const std::string& column, bool finished, RowDamage& damage) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  const StoredNumber n = stored_number(s, c);
  if (!n.is_number() || !std::isfinite(*n.value) || *n.value < 0) {
    if (finished) damage.note(column, n, "a finite number >= 0");
    return std::nullopt;
  }
  return n.value;
}

double number(const std::map<std::string, std::string>& config, const std::string& key) {
  return std::stod(config.at(key));
}

std::map<std::string, std::string> without(std::map<std::string, std::string> config, const std::string& key) {
  config.erase(key);
  return config;
}

// A measured run with a stored number that is not a number, or not in its
// range, cannot be used: read as failed, naming the run's column and what
// the store holds, so it is listed rather than averaged in (or read as 0).
void mark_damaged(const std::string& path, const RowDamage& damage, SweepRun& r) {
  if (damage.value.empty() || (r.status != "ok" && r.status != "partial")) return;
  const std::string why = fmt::format("damaged: the store '{}' holds {} for this run (stored as {}), not {}: not used",
                                      path, damage.value, r.status, damage.wanted);
  r.status = "failed";
  r.damaged = true;
  r.error = r.error.empty() ? why : why + "; " + r.error;
}

std::optional<double> mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  return summarize(values).mean;
}

}  // namespace

void require_results_store_file(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    throw UsageError(fmt::format("no results store at '{}'{}", path,
                                 error && error != std::errc::no_such_file_or_directory ? ": " + error.message() : ""));
  }
  if (std::filesystem::is_directory(status)) {
    throw UsageError(fmt::format("'{}' is a directory, not a results store (give the .sqlite file the sweep wrote)", path));
  }
}

std::string config_label(const std::map<std::string, std::string>& config, const std::string& empty_text) {
  std::string out;
  for (const auto& [k, v] : config) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? empty_text : out;
}

std::string ConfigResult::label() const { return config_label(config, "(single configuration)"); }

std::vector<SweepRun> load_sweep_runs(const std::string& path) {
  std::vector<SweepRun> runs;
  ReadOnlyStore store(path);
  const bool has_nodes = store.has_column("runs", "nodes");  // since sweeps across nodes
  const bool has_backend = store.has_column("runs", "backend");  // since simulated GPUs are said per run
  store.each(std::string("SELECT id, config, repeat, status, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j, epochs,"
                         " gpu_util_mean, gpu_util_cv, mem_util_mean, mem_util_cv, samples, steps, error, ") +
                 (has_nodes ? "nodes" : "NULL") + ", exit_code, " + (has_backend ? "backend, devices" : "NULL, NULL") +
                 " FROM runs ORDER BY id",
             [&](sqlite3_stmt* s) {
               SweepRun r;
               r.id = sqlite3_column_int64(s, 0);
               const auto config = nlohmann::json::parse(column_text(s, 1).empty() ? "{}" : column_text(s, 1), nullptr,
                                                         false);
               if (config.is_object()) {
                 for (const auto& [k, v] : config.items()) r.config[k] = v.is_string() ? v.get<std::string>() : v.dump();
               }
               r.repeat = sqlite3_column_int(s, 2);
               r.status = column_text(s, 3);
               // Only an ok or partial run's numbers are used (and so checked).
               const bool finished = r.status == "ok" || r.status == "partial";
               RowDamage damage;
               r.elapsed_s = measured(s, 4, "elapsed_s", finished, damage);
               r.gpu_energy_j = measured(s, 5, "gpu_energy_j", finished, damage);
               r.cpu_energy_j = measured(s, 6, "cpu_energy_j", finished, damage);
               r.dram_energy_j = measured(s, 7, "dram_energy_j", finished, damage);
               r.epochs = statistic(s, 8, "epochs", finished, damage);
               r.gpu_util_mean = statistic(s, 9, "gpu_util_mean", finished, damage);
               r.gpu_util_cv = statistic(s, 10, "gpu_util_cv", finished, damage);
               r.mem_util_mean = statistic(s, 11, "mem_util_mean", finished, damage);
               r.mem_util_cv = statistic(s, 12, "mem_util_cv", finished, damage);
               r.samples = statistic(s, 13, "samples", finished, damage);
               r.steps = statistic(s, 14, "steps", finished, damage);
               r.error = column_text(s, 15);
               r.nodes = std::max(1, static_cast<int>(std::clamp(column_double(s, 16).value_or(1), 1.0, 1e6)));
               if (sqlite3_column_type(s, 17) != SQLITE_NULL) r.exit_code = sqlite3_column_int(s, 17);
               r.backend = column_text(s, 18);
               r.devices = column_text(s, 19);
               mark_damaged(path, damage, r);
               runs.push_back(std::move(r));
             });
  if (store.has_column("run_nodes", "run_id")) {
    std::map<long long, SweepRun*> by_id;
    for (auto& r : runs) by_id[r.id] = &r;
    store.each("SELECT run_id, node, ranks, gpus, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j, warnings"
               " FROM run_nodes ORDER BY run_id, rowid",
               [&](sqlite3_stmt* s) {
                 const auto run = by_id.find(sqlite3_column_int64(s, 0));
                 if (run == by_id.end()) return;
                 // A node's numbers are the run's too (the per-node sections, energy per GPU-hour).
                 const std::string node = column_text(s, 1);
                 const auto column = [&](const char* name) { return fmt::format("run_nodes.{} of node '{}'", name, node); };
                 RowDamage damage;
                 SweepRunNode part;
                 part.node = node;
                 part.ranks = column_text(s, 2);
                 part.gpus = sqlite3_column_int(s, 3);
                 part.elapsed_s = measured(s, 4, column("elapsed_s"), true, damage);
                 part.gpu_energy_j = measured(s, 5, column("gpu_energy_j"), true, damage);
                 part.cpu_energy_j = measured(s, 6, column("cpu_energy_j"), true, damage);
                 part.dram_energy_j = measured(s, 7, column("dram_energy_j"), true, damage);
                 part.warnings = column_text(s, 8);
                 mark_damaged(path, damage, *run->second);
                 run->second->node_parts.push_back(std::move(part));
               });
  }
  return runs;
}

std::vector<PowerPoint> load_power_timelines(const std::string& path) {
  std::vector<PowerPoint> points;
  ReadOnlyStore(path).each("SELECT run_id, time_s, device, power_w FROM timelines ORDER BY run_id, device, time_s",
                           [&](sqlite3_stmt* s) {
                             // A point the store holds as no finite number cannot be drawn (nor read as 0).
                             const StoredNumber time_s = stored_number(s, 1), power_w = stored_number(s, 3);
                             if (!time_s.is_number() || !power_w.is_number() || !std::isfinite(*time_s.value) ||
                                 !std::isfinite(*power_w.value)) {
                               return;
                             }
                             points.push_back({sqlite3_column_int64(s, 0), *time_s.value, column_text(s, 2),
                                               *power_w.value});
                           });
  return points;
}

const GpuKnob* find_gpu_knob(const std::string& key) {
  for (const GpuKnob& knob : kGpuKnobs) {
    if (key == knob.key) return &knob;
  }
  return nullptr;
}

namespace {

// Per configuration and repeat, the attempt that counts: a successful one
// if any, else the latest (the store lists attempts in the order they ran).
std::vector<const SweepRun*> latest_attempts(const std::vector<SweepRun>& runs, int* earlier_attempts) {
  std::map<std::pair<std::map<std::string, std::string>, int>, std::size_t> chosen;
  std::vector<const SweepRun*> order;
  for (const auto& r : runs) {
    const auto key = std::make_pair(r.config, r.repeat);
    const auto it = chosen.find(key);
    if (it == chosen.end()) {
      chosen[key] = order.size();
      order.push_back(&r);
      continue;
    }
    ++*earlier_attempts;
    if (order[it->second]->status != "ok") order[it->second] = &r;
  }
  return order;
}

std::string status_words(const FailedRun& f) {
  // (A run that failed with exit status 0 failed elsewhere, e.g. it is damaged: its error says.)
  if (f.status == "failed" && f.exit_code && *f.exit_code != 0) return fmt::format("failed (exit status {})", *f.exit_code);
  if (f.status == "running") return "running (a sweep under way, or one that was killed)";
  return f.status;
}

}  // namespace

std::string simulated_warning(const SweepCounts& c) {
  if (c.simulated == 0) return "";
  return fmt::format("SIMULATED GPUs: {} of the {} successful runs ran on simulated GPUs; their energies are joule's "
                     "model, not measurements",
                     c.simulated, c.ok);
}

std::string describe_counts(const SweepCounts& c) {
  std::string text = fmt::format("{} configuration{}", c.configurations, c.configurations == 1 ? "" : "s");
  if (c.configurations_failed > 0) text += fmt::format(", {} failed (no successful run)", c.configurations_failed);
  if (c.configurations_with_failures > 0) {
    text += fmt::format(", {} with failed runs", c.configurations_with_failures);
  }
  text += fmt::format("; {} run{}: {} ok", c.runs, c.runs == 1 ? "" : "s", c.ok);
  if (c.failed > 0) text += fmt::format(", {} failed", c.failed);
  if (c.partial > 0) text += fmt::format(", {} partial", c.partial);
  if (c.interrupted > 0) text += fmt::format(", {} interrupted", c.interrupted);
  if (c.earlier_attempts > 0) {
    text += fmt::format(" ({} earlier attempt{} run again since, kept in the store)", c.earlier_attempts,
                        c.earlier_attempts == 1 ? "" : "s");
  }
  return text;
}

SweepAnalysis analyze_sweep(const std::vector<SweepRun>& all_runs, std::optional<double> max_power_w) {
  SweepAnalysis a;
  const std::vector<const SweepRun*> attempts = latest_attempts(all_runs, &a.counts.earlier_attempts);
  std::vector<SweepRun> runs;  // the attempts that count, for the fits below
  runs.reserve(attempts.size());
  for (const SweepRun* r : attempts) runs.push_back(*r);
  // Group successful runs by configuration, in first-seen order.
  std::vector<std::map<std::string, std::string>> order;
  std::map<std::map<std::string, std::string>, std::vector<const SweepRun*>> groups;
  std::map<std::map<std::string, std::string>, int> failures, partials;
  for (const auto& r : runs) {
    if (!groups.count(r.config) && !failures.count(r.config) && !partials.count(r.config)) order.push_back(r.config);
    ++a.counts.runs;
    if (r.status == "ok") {
      groups[r.config].push_back(&r);
      ++a.counts.ok;
      a.counts.simulated += r.simulated();
    } else if (r.status == "partial") {
      ++partials[r.config];  // a device's or node's energy is missing: the totals are short
      ++a.counts.partial;
    } else {
      ++failures[r.config];
      ++(r.status == "failed" ? a.counts.failed : a.counts.interrupted);
      a.failed_runs.push_back({r.id, r.config, r.repeat, r.status, r.exit_code, r.error});
    }
  }
  for (const auto& config : order) {
    ConfigResult c;
    c.config = config;
    c.failed = failures.count(config) ? failures[config] : 0;
    c.partial = partials.count(config) ? partials[config] : 0;
    for (const SweepRun* r : groups[config]) c.nodes = std::max(c.nodes, r->nodes);
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
    if (c.partial) a.partial_runs.emplace_back(c.label(), c.partial);
    ++a.counts.configurations;
    if (c.time_s.n == 0) {
      ++a.counts.configurations_failed;
      a.without_success.push_back(std::move(c));
      continue;
    }
    if (c.failed + c.partial > 0) ++a.counts.configurations_with_failures;
    a.configs.push_back(std::move(c));
  }
  if (a.configs.empty()) {
    std::string why = runs.empty() ? "the store holds no run" : describe_counts(a.counts);
    if (!a.failed_runs.empty()) {
      const FailedRun& f = a.failed_runs.front();
      why += fmt::format("; run {} ({} repeat {}) {}: {}", f.id, config_label(f.config, "(single configuration)"),
                         f.repeat, status_words(f), f.error.empty() ? "no error recorded" : f.error);
    }
    throw Error("no successful run to analyse: " + why);
  }

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
      // Without a knob in the grid every configuration's baseline is the first.
      if (largest.empty() ? j == 0 : same_rest && at_max) {
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

  // Scaling with GPU count: per group of the other settings, t = a * N^-b
  // and E = a * N^-b on time and energy per epoch when runs report epochs,
  // else per run; and per GPU count, the runs' time, energy and energy per
  // GPU-hour.
  if (a.configs.front().config.count("gpus")) {
    struct Group {
      std::vector<double> n, t, e;
      std::map<double, std::vector<const SweepRun*>> by_gpus;
    };
    std::map<std::map<std::string, std::string>, Group> by_group;
    for (const auto& r : runs) {
      if (r.status != "ok") continue;
      Group& g = by_group[without(r.config, "gpus")];
      const double per = r.epochs && *r.epochs > 0 ? *r.epochs : 1.0;
      g.n.push_back(number(r.config, "gpus"));
      g.t.push_back(r.elapsed_s / per);
      g.e.push_back(r.total_energy_j() / per);
      g.by_gpus[number(r.config, "gpus")].push_back(&r);
    }
    for (const auto& [group, g] : by_group) {
      if (g.by_gpus.size() < 2) continue;
      ScalingFit fit{config_label(group, "all"), fit_power_law(g.n, g.t), std::nullopt, {}};
      if (std::all_of(g.e.begin(), g.e.end(), [](double e) { return e > 0; })) fit.energy = fit_power_law(g.n, g.e);
      for (const auto& [gpus, members] : g.by_gpus) {
        ScalingPoint p;
        p.gpus = gpus;
        std::vector<double> t, e, rate;
        for (const SweepRun* r : members) {
          p.nodes = std::max(p.nodes, r->nodes);
          t.push_back(r->elapsed_s);
          e.push_back(r->total_energy_j());
          if (r->elapsed_s > 0) rate.push_back(r->total_energy_j() / 3600.0 / (gpus * r->elapsed_s / 3600.0));
        }
        p.time_s = summarize(t);
        p.energy_j = summarize(e);
        p.wh_per_gpu_hour = mean_of(rate).value_or(0);
        fit.points.push_back(p);
      }
      const ScalingPoint& first = fit.points.front();
      for (ScalingPoint& p : fit.points) {
        p.speedup = p.time_s.mean > 0 ? first.time_s.mean / p.time_s.mean : 0;
        p.efficiency = p.speedup / (p.gpus / first.gpus);
      }
      a.scaling.push_back(std::move(fit));
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

namespace {

// The configurations without a successful run and every run that did not
// succeed, with its error: nothing that failed drops out of the analysis.
std::string failures_text(const SweepAnalysis& a) {
  std::string out;
  if (!a.without_success.empty()) {
    out += "\nconfigurations without a successful run (not in the statistics above):\n";
    for (const auto& c : a.without_success) {
      out += fmt::format("  {:<40} {} failed{}\n", c.label(), c.failed,
                         c.partial ? fmt::format(", {} partial", c.partial) : "");
    }
  }
  if (!a.failed_runs.empty()) {
    out += "\nfailed and interrupted runs (kept in the store; a resumed sweep runs interrupted ones again, "
           "`joule sweep --retry-failed` failed ones too):\n";
    for (const auto& f : a.failed_runs) {
      out += fmt::format("  run {:<5} {} repeat {}: {}: {}\n", f.id, config_label(f.config, "(single configuration)"),
                         f.repeat, status_words(f), f.error.empty() ? "no error recorded" : f.error);
    }
  }
  return out;
}

}  // namespace

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
  const std::string failures = failures_text(a);
  out = describe_counts(a.counts) + "\n\n" + out;
  if (const std::string warning = simulated_warning(a.counts); !warning.empty()) out = warning + "\n" + out;
  for (const auto& [metric, i] : a.best) out += fmt::format("  {:<16} {}\n", metric, a.configs[i].label());
  std::string partial;
  for (const auto& [label, count] : a.partial_runs) partial += fmt::format("  {:<40} {}\n", label, count);
  if (!partial.empty()) out += "\npartial runs (a device's or node's measurement missing; not used above):\n" + partial;
  out += failures;
  if (!a.scaling.empty()) out += "\nscaling with GPU count (t = a * N^-b):\n";
  for (const auto& s : a.scaling) {
    out += fmt::format("  {:<38} a = {:.4g} +- {:.2g}, b = {:.3f} +- {:.3f}, R^2 = {:.4f}, n = {}\n", s.group, s.fit.a,
                       s.fit.a_se, s.fit.b, s.fit.b_se, s.fit.r_squared, s.fit.n);
  }
  bool any_energy_fit = false;
  for (const auto& s : a.scaling) any_energy_fit |= s.energy.has_value();
  if (any_energy_fit) out += "\nenergy with GPU count (E = a * N^c; c = 1: energy grows as the GPUs):\n";
  for (const auto& s : a.scaling) {
    if (!s.energy) continue;
    out += fmt::format("  {:<38} a = {:.4g} +- {:.2g}, c = {:.3f} +- {:.3f}, R^2 = {:.4f}, n = {}\n", s.group,
                       s.energy->a, s.energy->a_se, -s.energy->b, s.energy->b_se, s.energy->r_squared, s.energy->n);
  }
  if (!a.scaling.empty()) {
    out += "\nper GPU count (energy per GPU-hour = energy / (GPUs x hours), in Wh: the mean power per GPU):\n"
           "  group                      GPUs  nodes   n   time s (sd)          energy J (sd)     Wh/GPU-h  speed-up  "
           "efficiency\n";
  }
  for (const auto& s : a.scaling) {
    for (const auto& p : s.points) {
      out += fmt::format("  {:<25} {:>5g}  {:>5}  {:>2}  {:>9.3f} ({:>7.3f})  {:>10.1f} ({:>7.1f})  {:>8.1f}  {:>8.2f}  {:>10.2f}\n",
                         s.group, p.gpus, p.nodes, p.time_s.n, p.time_s.mean, p.time_s.stddev, p.energy_j.mean,
                         p.energy_j.stddev, p.wh_per_gpu_hour, p.speedup, p.efficiency);
    }
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
                        {"failed", c.failed}, {"partial", c.partial}, {"nodes", c.nodes}};
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
    nlohmann::json j = {{"group", s.group}, {"a", s.fit.a}, {"a_se", s.fit.a_se}, {"b", s.fit.b}, {"b_se", s.fit.b_se},
                        {"r_squared", s.fit.r_squared}, {"n", s.fit.n}};
    if (s.energy) {
      // E = a * N^c
      j["energy"] = {{"a", s.energy->a}, {"a_se", s.energy->a_se}, {"c", -s.energy->b}, {"c_se", s.energy->b_se},
                     {"r_squared", s.energy->r_squared}, {"n", s.energy->n}};
    }
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : s.points) {
      points.push_back({{"gpus", p.gpus}, {"nodes", p.nodes}, {"n", p.time_s.n}, {"time_s_mean", p.time_s.mean},
                        {"time_s_sd", p.time_s.stddev}, {"energy_j_mean", p.energy_j.mean},
                        {"energy_j_sd", p.energy_j.stddev}, {"wh_per_gpu_hour", p.wh_per_gpu_hour},
                        {"speedup", p.speedup}, {"efficiency", p.efficiency}});
    }
    j["points"] = points;
    scaling.push_back(j);
  }
  nlohmann::json eta = nlohmann::json::array();
  for (const auto& [value, i] : a.eta_picks) eta.push_back({{"eta", value}, {"config", a.configs[i].config}});
  nlohmann::json partial = nlohmann::json::object();
  for (const auto& [label, count] : a.partial_runs) partial[label] = count;
  nlohmann::json failed_runs = nlohmann::json::array();
  for (const auto& f : a.failed_runs) {
    failed_runs.push_back({{"id", f.id}, {"config", f.config}, {"repeat", f.repeat}, {"status", f.status},
                           {"exit_code", f.exit_code ? nlohmann::json(*f.exit_code) : nlohmann::json(nullptr)},
                           {"error", f.error}});
  }
  nlohmann::json without_success = nlohmann::json::array();
  for (const auto& c : a.without_success) {
    without_success.push_back({{"config", c.config}, {"failed", c.failed}, {"partial", c.partial}});
  }
  const SweepCounts& n = a.counts;
  nlohmann::json counts = {{"configurations", n.configurations},
                           {"configurations_failed", n.configurations_failed},
                           {"configurations_with_failures", n.configurations_with_failures},
                           {"runs", n.runs},
                           {"ok", n.ok},
                           {"failed", n.failed},
                           {"partial", n.partial},
                           {"interrupted", n.interrupted},
                           {"earlier_attempts", n.earlier_attempts},
                           {"simulated", n.simulated}};
  nlohmann::json out = {{"configs", configs}, {"best", best}, {"scaling", scaling}, {"pareto", a.pareto},
                        {"eta_picks", eta}, {"max_power_w", a.max_power_w}, {"partial_runs", partial},
                        {"counts", counts}, {"failed_runs", failed_runs},
                        {"configs_without_success", without_success},
                        {"simulated", n.simulated > 0}};
  if (n.simulated > 0) out["simulated_warning"] = simulated_warning(n);
  if (a.kwh_per_gpu_hour) {
    out["kwh_per_gpu_hour"] = {{"slope", a.kwh_per_gpu_hour->slope}, {"slope_se", a.kwh_per_gpu_hour->slope_se},
                               {"intercept", a.kwh_per_gpu_hour->intercept}, {"r_squared", a.kwh_per_gpu_hour->r_squared}};
  }
  return out;
}

}  // namespace joule
