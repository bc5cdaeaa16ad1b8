// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Measuring one job on every node it runs on, over MPI.
//
// Every rank of the communicator constructs an MpiMonitor (collectively).
// The ranks are grouped by node (cluster::node_name()); the lowest rank of
// each node is its leader and the only one that opens devices, so a node is
// measured exactly once however many ranks share it. It measures the GPUs
// its node's ranks may use (their CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES
// and ROCR_VISIBLE_DEVICES: visible_gpus_of), else all of them.
//
// Windows are collective: begin_window and end_window are called by every
// rank. The edges are a barrier (all nodes take their edge as the barrier
// releases, so the window is the same span of the job everywhere). At the
// end each leader sends rank 0 one compact message (numbers only; the
// node's devices were named once at start-up), and rank 0 returns the
// ClusterReport.
//
// Waiting is bounded: a window edge waits at most timeout_s for the other
// ranks, and rank 0 at most timeout_s more for the leaders' messages. A
// node that does not report in time (dead, hung, cut off) is named in the
// report's missing_nodes with why; the others' data is kept. After that the
// ranks are no longer in step: timed_out() is true, later windows throw,
// and the caller ends the job (joule measure --mpi calls MPI_Abort).
//
// Clocks: no node reads another's clock. Each leader takes its own edges
// on its own steady clock; the barrier is the agreement. What remains is
// how far apart the barrier releases the nodes, which each leader's wall
// clock at the end edge shows (ClusterReport::edge_skew_s: release spread
// plus the nodes' wall-clock offsets, an upper bound). Its effect on energy
// is at most the node's power times that spread.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/cluster/node_report.h"
#include "joule/measure/monitor.h"

namespace joule::cluster {

struct MpiMonitorOptions {
  double timeout_s = 60.0;  // longest wait for the other ranks at a window edge
};

// Opens a leader's Monitor for its node. job_gpus: the GPUs the node's
// ranks may use (entries of their visible-device variables: see keep_job_gpus),
// nullopt for all.
using OpenNodeMonitor = std::function<std::unique_ptr<Monitor>(
    const std::string& node, const std::optional<std::vector<std::string>>& job_gpus)>;

class MpiMonitor {
 public:
  // Collective over comm (which it duplicates, so its messages never meet
  // the job's). open_monitor runs on each node's leader only; where it
  // throws, the node is reported missing with why in every window.
  // Throws Error where MPI fails.
  MpiMonitor(MPI_Comm comm, const OpenNodeMonitor& open_monitor, MpiMonitorOptions options = {});
  ~MpiMonitor();
  MpiMonitor(const MpiMonitor&) = delete;
  MpiMonitor& operator=(const MpiMonitor&) = delete;

  const std::string& node() const { return node_; }
  bool leader() const { return leader_; }  // this rank measures its node
  int rank() const { return rank_; }
  int node_count() const { return node_count_; }
  Monitor* monitor() { return monitor_.get(); }  // the leader's (nullptr elsewhere, or where it failed)

  // Collective. Throws UsageError for a duplicate name (on the leaders),
  // Error where the other ranks did not arrive within the timeout.
  void begin_window(const std::string& name);
  // Collective. Rank 0 gets the job-wide report; other ranks nullopt. A
  // leader whose devices fail, or that does not report in time, is a
  // missing node, with why.
  std::optional<ClusterReport> end_window(const std::string& name, double settle_timeout_s = 1.0);

  // Whether some wait ran out (here): the ranks are out of step.
  bool timed_out() const { return timed_out_; }
  // A leader's own part of the last window, for printing where rank 0 may
  // not (after a timeout); nullopt elsewhere.
  const std::optional<NodeReport>& last_node_report() const { return last_node_report_; }

 private:
  struct Leader {
    int rank = 0;
    NodeReport roster;        // name, ranks, devices
    std::string open_error;   // its devices could not be opened
  };

  void exchange_rosters();
  bool wait_for(MPI_Request& request, double timeout_s);
  WindowMessage measure_window(const std::string& name, double settle_timeout_s, double edge_wall_s);
  std::vector<LeaderOutcome> collect(const WindowMessage& own, double timeout_s);
  void check_in_step() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MpiMonitorOptions options_;
  int rank_ = 0, size_ = 0, node_count_ = 0;
  std::string node_;
  std::vector<int> node_ranks_;
  bool leader_ = false;
  std::unique_ptr<Monitor> monitor_;
  std::string open_error_;
  NodeReport own_roster_;        // a leader's node, named once (its part of the last window is filled in from it)
  std::vector<Leader> leaders_;  // rank 0 only
  std::uint32_t window_seq_ = 0;
  bool timed_out_ = false;
  std::optional<NodeReport> last_node_report_;
  std::vector<std::pair<MPI_Request, std::string>> sends_;  // messages (and their bytes) still in flight
};

}  // namespace joule::cluster
