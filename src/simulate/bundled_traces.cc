// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/bundled_traces.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "joule/error.h"

#ifndef JOULE_SOURCE_DATA_DIR
#define JOULE_SOURCE_DATA_DIR ""
#endif

namespace joule {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTraceSet = "zeus-nsdi23";
constexpr const char* kTrainFile = "summary_train.csv";

bool holds_traces(const fs::path& data_dir) {
  std::error_code ec;
  return fs::is_regular_file(data_dir / kTraceSet / kTrainFile, ec);
}

}  // namespace

TraceDataSearch TraceDataSearch::for_this_process() {
  TraceDataSearch search;
  if (const char* env = std::getenv("JOULE_DATA_DIR"); env && *env) search.env_dir = env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) search.executable_path = exe.string();
  search.source_data_dir = JOULE_SOURCE_DATA_DIR;
  return search;
}

std::string BundledTraces::train_path() const { return (fs::path(dir) / kTrainFile).string(); }

std::vector<std::string> BundledTraces::gpus() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "summary_power_", suffix = ".csv";
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix)) {
      names.push_back(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string BundledTraces::power_path(const std::string& gpu) const {
  const auto known = gpus();
  if (std::find(known.begin(), known.end(), gpu) == known.end()) {
    throw UsageError(fmt::format("no bundled power trace for GPU '{}' in {} (bundled: {}); give one with --power-trace",
                                 gpu, dir, fmt::join(known, ", ")));
  }
  return (fs::path(dir) / fmt::format("summary_power_{}.csv", gpu)).string();
}

BundledTraces find_bundled_traces(const TraceDataSearch& search) {
  // An explicit $JOULE_DATA_DIR is the only place looked: a wrong one is an
  // error, not a silent switch to other data.
  if (search.env_dir) {
    if (holds_traces(*search.env_dir)) return {(fs::path(*search.env_dir) / kTraceSet).string()};
    throw Error(fmt::format("JOULE_DATA_DIR={}: no {}/{} there", *search.env_dir, kTraceSet, kTrainFile));
  }
  std::vector<std::string> looked;
  std::vector<fs::path> candidates;
  if (!search.executable_path.empty()) {
    candidates.push_back(fs::path(search.executable_path).parent_path().parent_path() / "share" / "joule");
  }
  if (!search.source_data_dir.empty()) candidates.push_back(search.source_data_dir);
  for (const auto& dir : candidates) {
    if (holds_traces(dir)) return {(dir / kTraceSet).string()};
    looked.push_back((dir / kTraceSet).lexically_normal().string());
  }
  throw Error(fmt::format("the bundled traces ({}/{}) are not in {} (set JOULE_DATA_DIR to the directory holding {}/, "
                          "or give --train-trace and --power-trace)",
                          kTraceSet, kTrainFile, looked.empty() ? "any place" : fmt::format("{}", fmt::join(looked, " or ")),
                          kTraceSet));
}

}  // namespace joule
