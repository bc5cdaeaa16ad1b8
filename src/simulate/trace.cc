// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "joule/common/csv.h"
#include "joule/error.h"

namespace joule {

const std::vector<WorkloadSpec>& zeus_workloads() {
  static const std::vector<WorkloadSpec> workloads = {
      {"librispeech", "librispeech", "deepspeech2", "adamw", 40.0, "WER <= 40.0", 192},
      {"squad", "squad", "bert_base_uncased", "adamw", 84.0, "F1 >= 84", 32},
      {"sentiment140", "sentiment140", "bert_base_uncased", "adamw", 0.84, "accuracy >= 0.84", 128},
      {"imagenet", "imagenet", "resnet50", "adadelta", 0.65, "accuracy >= 0.65", 256},
      {"cifar100", "cifar100", "shufflenetv2", "adadelta", 0.60, "accuracy >= 0.60", 1024},
      {"movielens", "movielens-1m", "ncf", "adam", 0.41, "NDCG >= 0.41", 1024},
  };
  return workloads;
}

const WorkloadSpec& find_workload(const std::string& name) {
  std::string known;
  for (const auto& w : zeus_workloads()) {
    if (w.name == name || w.dataset == name) return w;
    known += (known.empty() ? "" : ", ") + w.name;
  }
  throw UsageError(fmt::format("unknown workload '{}' (known: {})", name, known));
}

namespace {

bool same_metric(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

// Batch sizes and epochs are kept as int: a larger value in a trace is
// refused where it stands rather than wrapped (2^32 + 16 read as 16).
void check_fits_int(const CsvTable& table, std::size_t line, const char* column, long long value) {
  if (value > std::numeric_limits<int>::max()) {
    throw Error(fmt::format("{}: {} is larger than {}", table.where(line, column), value, std::numeric_limits<int>::max()));
  }
}

}  // namespace

WorkloadTrace load_workload(const std::string& train_path, const std::string& power_path, const WorkloadSpec& spec,
                            const TraceLoadOptions& options) {
  WorkloadTrace trace;
  trace.spec = spec;

  const CsvTable train = CsvTable::read(train_path);
  train.require_columns({"dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric",
                         "target_epoch"});
  const CsvTable power = CsvTable::read(power_path);
  power.require_columns(
      {"dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"});

  auto selected = [&](const CsvTable::Row& row) {
    return row.text("dataset") == spec.dataset && row.text("network") == spec.network &&
           row.text("optimizer") == spec.optimizer;
  };
  const std::string group = fmt::format("dataset={}, network={}, optimizer={}", spec.dataset, spec.network,
                                        spec.optimizer);

  // Train trace: runs per batch size, and the epoch each run reached the target.
  std::map<int, std::map<long long, std::optional<int>>> runs;
  std::map<int, std::size_t> train_first_line;
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto row = train.row(i);
    // Every row is type-checked, not only the selected workload's.
    const long long batch = row.integer("batch_size");
    const long long run = row.integer("run");
    const double metric = row.number("target_metric");
    // "nan" marks a level the run never reached.
    const std::string& epoch_text = row.text("target_epoch");
    const bool reached = epoch_text != "nan" && epoch_text != "NaN";
    const long long epoch = reached ? row.integer("target_epoch") : 0;
    if (batch <= 0) throw Error(fmt::format("{}: batch size must be positive", train.where(row.line, "batch_size")));
    if (epoch < 0) throw Error(fmt::format("{}: epoch must not be negative", train.where(row.line, "target_epoch")));
    check_fits_int(train, row.line, "batch_size", batch);
    check_fits_int(train, row.line, "target_epoch", epoch);
    if (!selected(row)) continue;
    const int b = static_cast<int>(batch);
    train_first_line.emplace(b, row.line);
    auto& slot = runs[b][run];
    if (reached && same_metric(metric, spec.target_metric)) slot = static_cast<int>(epoch);
    trace.max_epochs = std::max(trace.max_epochs, static_cast<int>(epoch));
  }
  if (runs.empty()) throw Error(fmt::format("{}: no rows for {}", train_path, group));

  // Power trace: one entry per power limit per batch size.
  std::map<int, std::map<double, PowerProfileEntry>> profiles;
  std::map<int, std::size_t> power_first_line;
  std::set<double> limits;
  for (std::size_t i = 0; i < power.size(); ++i) {
    const auto row = power.row(i);
    const long long batch = row.integer("batch_size");
    PowerProfileEntry entry{row.number("power_limit"), row.number("time_per_epoch"), row.number("average_power")};
    for (const char* column : {"power_limit", "time_per_epoch", "average_power"}) {
      if (row.number(column) <= 0) throw Error(fmt::format("{}: must be positive", power.where(row.line, column)));
    }
    if (batch <= 0) throw Error(fmt::format("{}: batch size must be positive", power.where(row.line, "batch_size")));
    check_fits_int(power, row.line, "batch_size", batch);
    if (!selected(row)) continue;
    const int b = static_cast<int>(batch);
    power_first_line.emplace(b, row.line);
    if (!profiles[b].emplace(entry.power_limit_w, entry).second) {
      throw Error(fmt::format("{}: power limit {} W appears twice for batch size {}",
                              power.where(row.line, "power_limit"), entry.power_limit_w, b));
    }
    limits.insert(entry.power_limit_w);
  }
  if (profiles.empty()) throw Error(fmt::format("{}: no rows for {}", power_path, group));
  // Real traces miss a limit here and there (a run that failed): a batch
  // size is simulated over the limits it has, as Zeus's simulator does.
  for (const auto& [b, profile] : profiles) {
    std::vector<std::string> missing;
    for (double limit : limits) {
      if (!profile.count(limit)) missing.push_back(fmt::format("{:g}", limit));
    }
    if (missing.empty()) continue;
    const std::string message =
        fmt::format("{}:{}: batch size {} has no row for power limit{} {} W (other batch sizes have one)", power_path,
                    power_first_line[b], b, missing.size() > 1 ? "s" : "", fmt::join(missing, ", "));
    if (options.strict) throw Error(message);
    trace.notes.push_back(fmt::format("{}; simulated over the {} limit{} it has", message, profile.size(),
                                      profile.size() > 1 ? "s" : ""));
    trace.note_kinds.push_back(TraceNoteKind::kMissingPowerLimits);
  }

  // Batch sizes must be in both traces.
  auto report_unmatched = [&](const std::map<int, std::size_t>& first_lines, const std::string& path,
                              const std::string& lacking, const std::string& other_path, TraceNoteKind kind,
                              auto&& in_other) {
    for (const auto& [b, line] : first_lines) {
      if (in_other(b)) continue;
      const std::string message =
          fmt::format("{}:{}: batch size {} of {} has no {} in {}", path, line, b, group, lacking, other_path);
      if (options.strict) throw Error(message);
      trace.notes.push_back(message + "; left out");
      trace.note_kinds.push_back(kind);
    }
  };
  report_unmatched(train_first_line, train_path, "power data", power_path, TraceNoteKind::kNoPowerData, [&](int b) { return profiles.count(b) > 0; });
  report_unmatched(power_first_line, power_path, "training runs", train_path, TraceNoteKind::kNoTrainingRuns, [&](int b) { return runs.count(b) > 0; });

  for (const auto& [b, by_run] : runs) {
    if (!profiles.count(b)) continue;
    trace.batch_sizes.push_back(b);
    for (const auto& [run, epochs] : by_run) trace.epochs[b].push_back(epochs);
    for (const auto& [limit, entry] : profiles[b]) trace.power[b].push_back(entry);
  }
  if (trace.batch_sizes.empty()) {
    throw Error(fmt::format("no batch size of {} is in both {} and {}", group, train_path, power_path));
  }
  if (!std::binary_search(trace.batch_sizes.begin(), trace.batch_sizes.end(), spec.default_batch_size)) {
    // On a GPU with less memory the default may not have run at all. Zeus's
    // simulator then starts from the largest batch size not above it.
    const std::string message = fmt::format("the default batch size {} of workload '{}' is not in both traces",
                                            spec.default_batch_size, spec.name);
    if (options.strict) throw Error(message);
    const auto above = std::upper_bound(trace.batch_sizes.begin(), trace.batch_sizes.end(), spec.default_batch_size);
    const bool below_exists = above != trace.batch_sizes.begin();
    trace.default_batch_size = below_exists ? *(above - 1) : trace.batch_sizes.front();
    trace.notes.push_back(fmt::format("{}; {} stands in ({})", message, trace.default_batch_size,
                                      below_exists ? "the largest below it" : "none is below it: the smallest"));
    trace.note_kinds.push_back(TraceNoteKind::kDefaultReplaced);
  } else {
    trace.default_batch_size = spec.default_batch_size;
  }
  trace.power_limits_w.assign(limits.begin(), limits.end());
  trace.max_power_w = trace.power_limits_w.back();
  return trace;
}

const char* to_string(TraceNoteKind kind) {
  switch (kind) {
    case TraceNoteKind::kNoPowerData: return "left out, no power data";
    case TraceNoteKind::kNoTrainingRuns: return "left out, no training runs";
    case TraceNoteKind::kMissingPowerLimits: return "simulated over the power limits it has";
    case TraceNoteKind::kDefaultReplaced: return "default batch size replaced";
  }
  return "?";
}

double max_power_limit_w(const WorkloadTrace& trace, int batch_size) {
  return trace.power.at(batch_size).back().power_limit_w;  // ascending
}

std::vector<WorkloadTrace> synthetic_workloads() {
  // Our own models, not measurements. Epochs to target grow with the square
  // of the distance (in doublings) from a best batch size, with seed noise;
  // four or more doublings away, every other run misses the target. Time per
  // epoch falls as the batch grows (better GPU use) and rises once the limit
  // caps the power the job draws; bigger batches draw more power.
  struct Model {
    const char* name;
    std::vector<int> sizes;
    int b0;
    int best;          // batch size with the fewest epochs
    double epochs;     // epochs at `best`
    double full_power_w;
    double epoch_s;    // at b0 and the largest limit
  };
  const std::vector<Model> models = {
      {"synthetic-cnn", {32, 64, 128, 256, 512, 1024, 2048}, 1024, 128, 20, 240, 60},
      {"synthetic-nlp", {8, 16, 32, 64, 128}, 64, 16, 4, 220, 600},
  };
  std::vector<WorkloadTrace> traces;
  std::mt19937_64 rng(2023);
  for (const auto& m : models) {
    WorkloadTrace t;
    t.synthetic = true;
    t.spec = {m.name, m.name, "model", "sgd", 1.0, "synthetic target", m.b0};
    t.default_batch_size = m.b0;
    t.batch_sizes = m.sizes;
    t.power_limits_w = {100, 125, 150, 175, 200, 225, 250};
    t.max_power_w = 250;
    t.max_epochs = static_cast<int>(m.epochs * 6);
    for (int b : m.sizes) {
      const double distance = std::fabs(std::log2(static_cast<double>(b) / m.best));
      for (int run = 0; run < 5; ++run) {
        const double epochs = m.epochs * (1.0 + 0.35 * distance * distance) * std::exp(0.1 * std::normal_distribution<>(0, 1)(rng));
        const bool misses = distance >= 4 && run % 2 == 0;
        t.epochs[b].push_back(misses || epochs > t.max_epochs ? std::nullopt
                                                              : std::optional<int>(static_cast<int>(std::ceil(epochs))));
      }
      // Bigger batches use the GPU better: less time per epoch, more power.
      const double scale = std::pow(static_cast<double>(m.b0) / b, 0.6);
      const double demand_w = std::min(m.full_power_w, 90.0 + 40.0 * std::log2(static_cast<double>(b)));
      for (double limit : t.power_limits_w) {
        const double power_w = std::min(demand_w, limit);
        const double slowdown = demand_w <= limit ? 1.0 : std::cbrt((demand_w - 60.0) / (power_w - 60.0));
        t.power[b].push_back({limit, m.epoch_s * scale * slowdown, power_w});
      }
    }
    traces.push_back(std::move(t));
  }
  return traces;
}

}  // namespace joule
