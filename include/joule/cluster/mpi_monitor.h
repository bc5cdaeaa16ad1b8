// Measuring one job on every node it runs on, over MPI.
//
// Every rank of the communicator constructs an MpiMonitor (collectively).
// The ranks are grouped by node (cluster::node_name()); the lowest rank of
// each node is its leader and the only one that opens devices, so a node is
// measured exactly once however many ranks share it. Windows are
// collective: begin_window and end_window are called by every rank, the
// edges are a barrier (all nodes take their edge as the barrier releases,
// so the window is the same span of the job everywhere), and end_window
// gathers each leader's NodeReport (a few hundred bytes of JSON) to rank 0,
// which returns the ClusterReport.
//
// Clocks: no node reads another's clock. Each leader takes its own edges
// on its own steady clock; the barrier is the agreement. What remains is
// how far apart the barrier releases the nodes, which each leader's wall
// clock at the end edge shows (ClusterReport::edge_skew_s: release spread
// plus the nodes' wall-clock offsets, an upper bound). Its effect on energy
// is at most the node's power times that spread.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/cluster/node_report.h"
#include "joule/measure/monitor.h"

namespace joule::cluster {

class MpiMonitor {
 public:
  // Collective over comm. open_monitor runs on each node's leader only.
  // Throws Error where MPI fails.
  MpiMonitor(MPI_Comm comm, const std::function<std::unique_ptr<Monitor>()>& open_monitor);
  ~MpiMonitor();
  MpiMonitor(const MpiMonitor&) = delete;
  MpiMonitor& operator=(const MpiMonitor&) = delete;

  const std::string& node() const { return node_; }
  bool leader() const { return monitor_ != nullptr; }  // this rank measures its node
  int rank() const { return rank_; }
  int node_count() const { return node_count_; }
  Monitor* monitor() { return monitor_.get(); }  // the leader's; nullptr elsewhere

  // Collective. Throws UsageError for a duplicate name (on the leaders).
  void begin_window(const std::string& name);
  // Collective. Rank 0 gets the job-wide report; other ranks nullopt. A
  // leader whose devices fail is reported as a missing node, with why.
  std::optional<ClusterReport> end_window(const std::string& name, double settle_timeout_s = 1.0);

 private:
  MPI_Comm comm_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 0, node_count_ = 0;
  std::string node_;
  std::vector<int> node_ranks_;
  std::unique_ptr<Monitor> monitor_;
};

}  // namespace joule::cluster
