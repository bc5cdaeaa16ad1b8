// One job measured on many nodes: what each node's agent measured in a
// window, and the job-wide result that the root assembles from them.
//
// A node's report travels between processes (over MPI or any other channel)
// as compact JSON: a few hundred bytes per node, whatever the ranks on it.
// The parts here need no MPI; mpi_monitor.h moves them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/measure/monitor.h"

namespace joule::cluster {

// The name this process's node goes by: $JOULE_NODE_NAME when set, else the
// host name. Two documented overrides let the ranks of one machine pose as
// nodes in tests: $JOULE_NODE_NAME names the node outright (one per mpirun
// block), and $JOULE_RANKS_PER_NODE=K appends "-<world_rank / K>" so that a
// launcher that sets no per-rank environment (srun, a sweep's mpirun) still
// makes nodes of K ranks. world_rank < 0: not known (no suffix).
std::string node_name(int world_rank = -1);

struct DeviceEnergy {
  std::string kind;  // "gpu", "cpu_package" or "dram"
  std::string name;  // e.g. "gpu0 NVIDIA H100 80GB HBM3", "package-0"
  double energy_j = 0.0;
};

struct NodeReport {
  std::string node;
  std::vector<int> ranks;  // the job's ranks on this node
  double elapsed_s = 0.0;
  std::vector<DeviceEnergy> devices;
  std::vector<std::string> warnings;  // devices that failed inside the window, sources missing

  double energy_j(const std::string& kind) const;  // summed over this node's devices of that kind
  double total_energy_j() const;
};

// The node's part of a window measured by its Monitor.
NodeReport node_report_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor,
                          const Measurement& measurement);

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
