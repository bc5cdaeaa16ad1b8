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
  node_ = node_name().substr(0, kNameSlot - 1);
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
    nlohmann::json json;
    try {
      const Measurement m = monitor_->end_window_settled(name, settle_timeout_s);
      json = to_json(node_report_of(node_, node_ranks_, *monitor_, m));
    } catch (const std::exception& e) {
      json = {{"node", node_}, {"error", e.what()}};
    }
    json["edge_wall_s"] = edge_wall_s;
    payload = json.dump();
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

  ClusterReport report;
  report.window = name;
  report.world_size = size_;
  std::vector<double> edges_wall_s;  // of the reports that arrived readable
  for (int r = 0; r < size_; ++r) {
    if (lengths[static_cast<std::size_t>(r)] == 0) continue;  // not a leader
    const std::string text(received.data() + offsets[static_cast<std::size_t>(r)],
                           static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
    try {
      const auto json = nlohmann::json::parse(text);
      edges_wall_s.push_back(json.value("edge_wall_s", 0.0));
      if (json.contains("error")) {
        report.missing_nodes.push_back(
            fmt::format("{} (rank {}): {}", json.value("node", "?"), r, json.value("error", "no reason given")));
        continue;
      }
      report.nodes.push_back(node_report_from_json(json));
    } catch (const std::exception& e) {
      report.missing_nodes.push_back(fmt::format("the node of rank {}: its report is unreadable: {}", r, e.what()));
    }
  }
  if (!edges_wall_s.empty()) {
    const auto [first, last] = std::minmax_element(edges_wall_s.begin(), edges_wall_s.end());
    report.edge_skew_s = *last - *first;
  }
  return report;
}

}  // namespace joule::cluster
