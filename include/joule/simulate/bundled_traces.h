// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The Zeus NSDI'23 traces that ship with joule (data/zeus-nsdi23 in the
// source tree, share/joule/zeus-nsdi23 once installed), and where to find them.
//
// Lookup order, first hit wins:
//   1. $JOULE_DATA_DIR (when set, it must hold them: no fallback past it);
//   2. <directory of the executable>/../share/joule (an installed joule);
//   3. the source tree's data/ (compiled in; a build run from its checkout).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace joule {

// Where to look; the defaults describe this process.
struct TraceDataSearch {
  std::optional<std::string> env_dir;  // $JOULE_DATA_DIR
  std::string executable_path;         // /proc/self/exe
  std::string source_data_dir;         // <source>/data, fixed at compile time

  static TraceDataSearch for_this_process();
};

struct BundledTraces {
  std::string dir;  // .../zeus-nsdi23
  std::string train_path() const;
  // Throws UsageError naming the GPU models bundled when `gpu` is not one.
  std::string power_path(const std::string& gpu) const;
  // GPU models with a power trace (summary_power_<gpu>.csv), sorted.
  std::vector<std::string> gpus() const;
};

// The first directory of the search holding zeus-nsdi23/summary_train.csv.
// Throws Error naming every place it looked.
BundledTraces find_bundled_traces(const TraceDataSearch& search = TraceDataSearch::for_this_process());

}  // namespace joule
