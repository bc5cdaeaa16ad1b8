// One job measured on many nodes: what each node's agent measured in a
// window, and the job-wide result that the root assembles from them.
//
// A node's report travels between processes (over MPI or any other channel)
// as compact JSON: a few hundred bytes per node, whatever the ranks on it.
// The parts here need no MPI; mpi_monitor.h moves them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "joule/measure/monitor.h"

namespace joule::cluster {

// The name this process's node goes by: $JOULE_NODE_NAME when set (a
// documented override so that several ranks on one machine can pose as
// nodes in tests), else the host name.
std::string node_name();

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

nlohmann::json to_json(const ClusterReport& report);
std::string to_text(const ClusterReport& report);

}  // namespace joule::cluster
