// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// One job measured on many nodes: what each node's agent measured in a
// window, and the job-wide result that the root assembles from them.
//
// A node's report travels between processes: over MPI as a roster once and
// a compact binary message per window (136 bytes for a node of 8
// GPUs), over other channels (torch.distributed) as JSON. The parts here
// need no MPI; mpi_monitor.h moves them.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"

namespace joule::cluster {

// The name this process's node goes by: $JOULE_NODE_NAME when set, else the
// host name. Two documented overrides let the ranks of one machine pose as
// nodes in tests: $JOULE_NODE_NAME names the node outright (one per mpirun
// block), and $JOULE_RANKS_PER_NODE=K appends "-<world_rank / K>" so that a
// launcher that sets no per-rank environment (srun, a sweep's mpirun) still
// makes nodes of K ranks. world_rank < 0: not known (no suffix).
std::string node_name(int world_rank = -1);

// A node's own file beside a job-wide path: "run.csv" on node "gpu-7" is
// "run.gpu-7.csv" (a timeline per node, written where every node shares
// the directory).
std::string node_file_path(const std::string& path, const std::string& node);

struct DeviceEnergy {
  std::string kind;  // "gpu", "cpu_package" or "dram"
  std::string name;  // e.g. "gpu0 NVIDIA H100 80GB HBM3", "package-0"
  double energy_j = 0.0;
  bool simulated = false;  // a simulated GPU: its energy is joule's model, not a measurement
};

struct NodeReport {
  std::string node;
  std::vector<int> ranks;  // the job's ranks on this node
  double elapsed_s = 0.0;
  std::vector<DeviceEnergy> devices;
  std::vector<std::string> warnings;  // devices that failed inside the window, sources missing
  bool devices_failed = false;        // some device failed inside the window: its energy stops there

  double energy_j(const std::string& kind) const;  // summed over this node's devices of that kind
  double total_energy_j() const;
};

// The node's part of a window measured by its Monitor.
NodeReport node_report_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor,
                          const Measurement& measurement);

// A node's roster: its name, ranks and devices (kinds and names, energies
// zero), sent to the root once so that each window only carries numbers.
NodeReport roster_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor);

// A leader's message for one window: numbers in the roster's device order.
// Encoded in a few bytes per device (x86-64 and aarch64 alike: host byte
// order, which a marker checks), so a node of 8 GPUs, 2 packages and 2 DRAM
// zones sends 136 bytes plus its warnings.
struct WindowMessage {
  std::uint32_t window_seq = 0;  // which window: a late message of an earlier one is told apart
  double elapsed_s = 0.0;
  double edge_wall_s = 0.0;      // the leader's wall clock at the end edge
  std::vector<double> energies_j;
  std::vector<std::string> warnings;
  bool devices_failed = false;
  std::string error;             // the leader's measurement failed: why (no energies)
};
WindowMessage window_message_of(std::uint32_t window_seq, const Monitor& monitor, const Measurement& measurement,
                                double edge_wall_s);
std::string encode(const WindowMessage& message);
// Throws Error saying what is wrong with bytes that are not a message.
WindowMessage decode_window_message(const std::string& bytes);
// The node's report for a window. Throws Error where the message's numbers
// do not fit the roster.
NodeReport fill_roster(const NodeReport& roster, const WindowMessage& message);

// A rank's GPUs as its environment names them, in one list for job_gpus_of:
// CUDA_VISIBLE_DEVICES's entries as they are (NVIDIA GPUs: indices or "GPU-"
// UUIDs), then the AMD GPUs that ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES
// leave (ROCm applies ROCR's list first and HIP's indices count within it),
// each written "amd:<entry>". A vendor whose variables are unset while the
// other's are set adds "nvidia:all" or "amd:all". nullopt where none is set:
// the rank sees every GPU. Throws UsageError for a HIP index past ROCR's list.
std::optional<std::string> visible_gpus_of(const std::optional<std::string>& cuda_visible,
                                           const std::optional<std::string>& hip_visible,
                                           const std::optional<std::string>& rocr_visible);
// The same from this process's environment.
std::optional<std::string> visible_gpus_from_environment();

// The GPUs a node's ranks may use, from each rank's visible_gpus_of (nullopt
// for a rank that sees every GPU). The result is nullopt where the node's GPUs
// are all to be measured, else the union of the entries, in first-seen order.
std::optional<std::vector<std::string>> job_gpus_of(const std::vector<std::optional<std::string>>& visible_per_rank);
// Keeps the GPUs that entries name, each vendor numbered by its own runtime
// (vendor_index(), over the whole node's list): a plain index is an NVIDIA
// GPU's (NVML's order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID), a
// UUID ("GPU-...") or its prefix any GPU's; "amd:<index>" an AMD GPU's number
// among AMD GPUs, "amd:GPU-<hex>" (ROCm's form) its unique id or a prefix;
// "nvidia:all" / "amd:all" every GPU of that vendor. Throws UsageError naming
// an entry that matches no GPU.
void keep_job_gpus(Devices& devices, const std::vector<std::string>& entries);

nlohmann::json to_json(const NodeReport& report);
// Throws Error naming the field for a report that is not one (another
// version of joule on some node, a corrupted message).
NodeReport node_report_from_json(const nlohmann::json& json);

struct ClusterReport {
  std::string window;
  int world_size = 0;
  std::vector<NodeReport> nodes;             // in the order of their lowest rank
  std::vector<std::string> missing_nodes;    // nodes whose report did not arrive, with why
  double edge_skew_s = 0.0;                  // spread of the nodes' edge times on their wall clocks

  // Every node reported and none lost a device inside the window.
  bool complete() const;

  double energy_j(const std::string& kind) const;
  double total_energy_j() const;
};

// What the root learnt of one node's leader in a window: its report, or
// why there is none (the leader's devices failed, its message was not a
// report, nothing arrived in time).
struct LeaderOutcome {
  int rank = 0;      // the leader's rank
  std::string node;  // the node's name as the root knows it
  std::optional<NodeReport> report;
  std::string missing_reason;           // when there is no report
  std::optional<double> edge_wall_s;    // the leader's wall clock at the end edge
};

// The job's report from its leaders' outcomes (in rank order).
ClusterReport assemble_cluster_report(const std::string& window, int world_size,
                                      const std::vector<LeaderOutcome>& outcomes);

// A leader's message as JSON (the channel for torch.distributed): the
// node's report with "edge_wall_s", or {"node", "error"} where its
// measurement failed. Unreadable text becomes a missing node.
std::string leader_message_json(const NodeReport& report, double edge_wall_s);
std::string leader_error_json(const std::string& node, const std::string& error, double edge_wall_s);
LeaderOutcome leader_outcome_from_json(int rank, const std::string& node, const std::string& text);

nlohmann::json to_json(const ClusterReport& report);
std::string to_text(const ClusterReport& report);

}  // namespace joule::cluster
