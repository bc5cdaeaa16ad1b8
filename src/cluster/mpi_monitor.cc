#include "joule/cluster/mpi_monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "joule/error.h"

namespace joule::cluster {

namespace {

void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(fmt::format("MPI: {} failed: {}", call, text));
}

// Node names travel in fixed slots: one allgather groups the ranks.
constexpr std::size_t kNameSlot = 256;

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

MpiMonitor::MpiMonitor(MPI_Comm comm, const std::function<std::unique_ptr<Monitor>()>& open_monitor) : comm_(comm) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  node_ = node_name(rank_).substr(0, kNameSlot - 1);
  std::vector<char> mine(kNameSlot, '\0'), all(kNameSlot * static_cast<std::size_t>(size_));
  std::memcpy(mine.data(), node_.data(), node_.size());
  check(MPI_Allgather(mine.data(), kNameSlot, MPI_CHAR, all.data(), kNameSlot, MPI_CHAR, comm_), "MPI_Allgather");
  // Nodes numbered in the order of their lowest rank.
  std::vector<std::string> nodes;
  int color = -1;
  for (int r = 0; r < size_; ++r) {
    const std::string name(all.data() + static_cast<std::size_t>(r) * kNameSlot);
    auto at = std::find(nodes.begin(), nodes.end(), name);
    if (at == nodes.end()) at = nodes.insert(nodes.end(), name);
    if (name == node_) {
      color = static_cast<int>(at - nodes.begin());
      node_ranks_.push_back(r);
    }
  }
  node_count_ = static_cast<int>(nodes.size());
  check(MPI_Comm_split(comm_, color, rank_, &node_comm_), "MPI_Comm_split");
  if (rank_ == node_ranks_.front()) monitor_ = open_monitor();
}

MpiMonitor::~MpiMonitor() {
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

void MpiMonitor::begin_window(const std::string& name) {
  check(MPI_Barrier(comm_), "MPI_Barrier");
  if (monitor_) monitor_->begin_window(name);
}

std::optional<ClusterReport> MpiMonitor::end_window(const std::string& name, double settle_timeout_s) {
  check(MPI_Barrier(comm_), "MPI_Barrier");
  std::string payload;
  if (monitor_) {
    const double edge_wall_s = wall_s();
    try {
      const Measurement m = monitor_->end_window_settled(name, settle_timeout_s);
      payload = leader_message_json(node_report_of(node_, node_ranks_, *monitor_, m), edge_wall_s);
    } catch (const std::exception& e) {
      payload = leader_error_json(node_, e.what(), edge_wall_s);
    }
  }
  // The sizes, then the reports: rank 0 learns where each leader's begins.
  const int length = static_cast<int>(payload.size());
  std::vector<int> lengths(rank_ == 0 ? static_cast<std::size_t>(size_) : 0), offsets;
  check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
  std::vector<char> received;
  if (rank_ == 0) {
    int total = 0;
    for (const int l : lengths) {
      offsets.push_back(total);
      total += l;
    }
    received.resize(static_cast<std::size_t>(total));
  }
  check(MPI_Gatherv(payload.data(), length, MPI_CHAR, received.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                    comm_),
        "MPI_Gatherv");
  if (rank_ != 0) return std::nullopt;

  std::vector<LeaderOutcome> outcomes;
  for (int r = 0; r < size_; ++r) {
    if (lengths[static_cast<std::size_t>(r)] == 0) continue;  // not a leader
    const std::string text(received.data() + offsets[static_cast<std::size_t>(r)],
                           static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
    outcomes.push_back(leader_outcome_from_json(r, fmt::format("the node of rank {}", r), text));
    if (outcomes.back().report) outcomes.back().node = outcomes.back().report->node;
  }
  return assemble_cluster_report(name, size_, outcomes);
}

}  // namespace joule::cluster
