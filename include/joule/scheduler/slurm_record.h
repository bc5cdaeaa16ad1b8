// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A Slurm job's energy as joule measured it, put where Slurm's accounting
// shows it: the job's AdminComment in slurmdbd, which
// `sacct -o JobID,AdminComment` lists beside the job's other figures.
//
// slurmctld runs `joule slurm-epilog` as its EpilogSlurmctld whenever a job
// ends (completed, failed, cancelled, timed out, its node lost). It asks the
// exporter of each of the job's nodes for the job's ledger entries
// (GET /jobs?job=slurm/ID, which first charges the node's energy up to that
// moment), adds them up per step, and writes them with sacctmgr. The
// comment's other text, another tool's, is kept. docs/cluster.md says why
// this way and not an acct_gather_energy or SPANK plugin.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace joule::slurm {

// A node of the job, and where its exporter listens.
struct Node {
  std::string name;     // Slurm's NodeName
  std::string address;  // its NodeAddr (the name itself where Slurm has none)
};

// What one node's exporter said about the job.
struct NodeJobEnergy {
  std::string node;
  // GPU energy per step ("0", "batch"; "" where the step was not known), in J.
  std::map<std::string, double> gpu_energy_by_step_j = {};
  // CPU package and DRAM energy (every RAPL zone), where the node has RAPL.
  std::optional<double> cpu_energy_j = {};
  std::string problem = {};  // why the node gave no figure; empty when it did
};

// The exporter's GET /jobs reply, for job_label's entries: GPU energy per
// step summed over GPUs, and CPU energy summed over zones (none where the
// node has no RAPL zone). Throws Error naming `where` and the field when it
// is not such a reply or holds an energy that is not a finite number >= 0.
NodeJobEnergy parse_jobs_reply(const std::string& body, const std::string& job_label, const std::string& where);

// Asks each node's exporter (http://ADDRESS:port/jobs?job=LABEL), each
// within timeout_s; a node that does not answer has its problem said.
std::vector<NodeJobEnergy> gather_job_energy(const std::string& job_label, const std::vector<Node>& nodes, int port,
                                             double timeout_s);

// The words joule writes, one token with no space or quote (sacctmgr turns
// quotes into backticks): "joule:gpu_energy_j=1234.5,cpu_energy_j=80.2,
// step_0_j=1134.5,step_batch_j=100,nodes=2/2" (cpu_energy_j where a node
// has RAPL; the steps are the GPU energy's), and ",missing=NODE+NODE" where
// nodes gave no figure (their energy is not in the total).
std::string joule_comment(const std::vector<NodeJobEnergy>& nodes);

// existing with its joule token (if any) replaced by joule_token, or
// joule_token added after a space: other tools' words are kept.
std::string merged_admin_comment(const std::string& existing, const std::string& joule_token);

// ---- Slurm's side, through its client commands (on PATH; SLURM_CONF as set) ----

// The nodes of a job's node list ("gpu[01-03],login1"), with their addresses
// (scontrol show hostnames; scontrol show node). Throws Error with what
// scontrol said.
std::vector<Node> nodes_of(const std::string& nodelist);

// The AdminComment slurmdbd holds for job_id ("4711", "4711_3" for an array
// task); empty when none, or when the job is not there yet.
std::string stored_admin_comment(const std::string& job_id);

// Sets the job's AdminComment in slurmdbd (sacctmgr modify job), trying
// again for up to wait_s while the job has not reached slurmdbd yet.
// Throws Error with what sacctmgr said.
void store_admin_comment(const std::string& job_id, const std::string& comment, double wait_s);

}  // namespace joule::slurm
