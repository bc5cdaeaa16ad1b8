// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule slurm-epilog`: slurmctld's EpilogSlurmctld. When a job ends, its
// GPU energy from each node's exporter goes into its AdminComment in
// slurmdbd, where sacct shows it (include/joule/scheduler/slurm_record.h).
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/scheduler/slurm_record.h"

namespace joule::cli {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The id slurmdbd knows the job by: an array task's is ARRAYID_TASK (its
// own SLURM_JOB_ID, as a bare id, would name the whole array for the first task).
std::string accounting_id(const std::string& job) {
  const std::string array = environment("SLURM_ARRAY_JOB_ID"), task = environment("SLURM_ARRAY_TASK_ID");
  if (!array.empty() && !task.empty() && job == environment("SLURM_JOB_ID")) return array + "_" + task;
  return job;
}

}  // namespace

int run_slurm_epilog(const SlurmEpilogCliOptions& o) {
  const std::string job = o.job.empty() ? environment("SLURM_JOB_ID") : o.job;
  const std::string nodelist = o.nodes.empty() ? environment("SLURM_JOB_NODELIST") : o.nodes;
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(fmt::format("slurm-epilog: the job id '{}' is not a Slurm job id (give --job, or run as "
                                 "slurmctld's EpilogSlurmctld, which sets SLURM_JOB_ID)",
                                 printable(job)));
  }
  if (nodelist.empty()) {
    throw UsageError("slurm-epilog: no node list (give --nodes, or run as slurmctld's EpilogSlurmctld, which sets "
                     "SLURM_JOB_NODELIST)");
  }
  if (o.exporter_port < 1 || o.exporter_port > 65535) throw UsageError("--exporter-port must be 1 to 65535");
  const std::vector<slurm::Node> nodes = slurm::nodes_of(nodelist);
  const std::vector<slurm::NodeJobEnergy> energy = slurm::gather_job_energy("slurm/" + job, nodes, o.exporter_port, o.timeout_s);
  for (const slurm::NodeJobEnergy& node : energy) {
    if (!node.problem.empty()) {
      std::cerr << fmt::format("joule slurm-epilog: job {}: no figure from {}: {}\n", job, node.node, node.problem);
    }
  }
  const std::string token = slurm::joule_comment(energy);
  const std::string id = accounting_id(job);
  if (o.dry_run) {
    std::cout << token << '\n';
    return 0;
  }
  const std::string comment = slurm::merged_admin_comment(slurm::stored_admin_comment(id), token);
  slurm::store_admin_comment(id, comment, o.wait_s);
  std::cout << fmt::format("job {}: AdminComment {}\n", id, comment);
  return 0;
}

}  // namespace joule::cli
