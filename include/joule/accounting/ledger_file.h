// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The job ledger kept across restarts (joule exporter --ledger): a JSON file
// rewritten after every accounting step (written aside, then renamed, so a
// crash leaves the last complete one) and read at start, so that per-job
// counters go on from where they were rather than from zero.
//
// Beside the totals it keeps, per GPU, a mark: the driver's energy counter
// at one read and the GPU's accounted total at that moment. At the next
// start the counter's advance since the mark, less what was accounted after
// it, is the energy drawn while no exporter ran; it is charged like one long
// step to the processes listed before and after (docs/telemetry.md).
//
// GPUs are matched by uuid and CPU zones by label. What the file holds for a
// GPU or zone this node no longer has is kept in the file as it was, not
// served. A file that is not a ledger, or holds a number that is negative
// or not finite, stops the start with an error naming the file and the
// field: it is never overwritten.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "joule/accounting/job_ledger.h"

namespace joule {

// The driver's energy counter at a read, and the GPU's accounted total then.
struct CounterMark {
  double counter_j = 0.0;
  double accounted_j = 0.0;
};

class LedgerFile {
 public:
  LedgerFile(std::filesystem::path path, std::vector<std::string> gpu_uuids, std::vector<std::string> zone_labels);

  struct Restored {
    bool found = false;                              // false: no file yet, nothing restored
    double saved_unix_s = 0.0;                       // when it was written
    std::vector<std::optional<CounterMark>> marks;   // per GPU of this node
  };
  // Restores the file's totals into ledger (sized for this node's GPUs and
  // zones). Throws UsageError naming the file and the field.
  Restored load(JobLedger& ledger);
  // The same from the file's document, read already (read_document).
  Restored load(const nlohmann::json& doc, JobLedger& ledger);
  // The file's JSON; none when there is no file. Throws UsageError naming
  // the file when it cannot be read or is not JSON.
  static std::optional<nlohmann::json> read_document(const std::filesystem::path& path);
  // Writes the ledger and the marks. Throws Error naming the file.
  void save(const JobLedger& ledger, const std::vector<std::optional<CounterMark>>& marks, double now_unix_s) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<std::string> gpu_uuids_, zone_labels_;
  // What the file held for GPUs and zones this node lacks: written back as read.
  nlohmann::json carried_gpus_ = nlohmann::json::array();
  nlohmann::json carried_zones_ = nlohmann::json::array();
  nlohmann::json carried_jobs_ = nlohmann::json::array();
  nlohmann::json carried_pods_ = nlohmann::json::array();
  nlohmann::json carried_job_cpu_ = nlohmann::json::array();
};

// A ledger file read whole, for showing it (joule ledger): every GPU and
// zone it names, in its order. Throws UsageError as LedgerFile::load does,
// and when there is no file.
struct LedgerContents {
  double saved_unix_s = 0.0;
  std::vector<std::string> gpu_uuids, zone_labels;
  JobLedger ledger{0, 0};
};
LedgerContents read_ledger_file(const std::filesystem::path& path);

}  // namespace joule
