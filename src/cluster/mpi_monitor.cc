// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/cluster/mpi_monitor.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

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

// Node names travel in fixed slots: one allgather groups the ranks. Each
// rank's visible GPUs go to its node's leader in a slot too: a
// set flag, then the value.
constexpr std::size_t kNameSlot = 256;
constexpr std::size_t kVisibleSlot = 1024;
constexpr int kMessageTag = 7301;  // on our own duplicate of the communicator

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Polls until done() or the deadline: spinning first (a window end that
// is ready in microseconds should not pay a sleep), then sleeping briefly.
template <typename Done>
bool poll_until(double timeout_s, Done done) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (!done()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now - start > std::chrono::milliseconds(5)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// A rank's visible GPUs (visible_gpus_from_environment: CUDA_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES) in a slot: byte 0 says whether
// any is set.
std::vector<char> visible_slot() {
  std::vector<char> slot(kVisibleSlot, '\0');
  if (const std::optional<std::string> visible = visible_gpus_from_environment()) {
    slot[0] = 1;
    std::strncpy(slot.data() + 1, visible->c_str(), kVisibleSlot - 2);
  }
  return slot;
}

}  // namespace

MpiMonitor::MpiMonitor(MPI_Comm comm, const OpenNodeMonitor& open_monitor, MpiMonitorOptions options)
    : options_(options) {
  if (!(options_.timeout_s > 0)) throw UsageError(fmt::format("the MPI timeout {} s is not positive", options_.timeout_s));
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
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
  leader_ = rank_ == node_ranks_.front();

  // The leader learns which GPUs its node's ranks may use.
  MPI_Comm node_comm = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, rank_, &node_comm), "MPI_Comm_split");
  const std::vector<char> own_visible = visible_slot();
  std::vector<char> node_visible(leader_ ? kVisibleSlot * node_ranks_.size() : 0);
  const int gathered = MPI_Gather(own_visible.data(), kVisibleSlot, MPI_CHAR, node_visible.data(), kVisibleSlot,
                                  MPI_CHAR, 0, node_comm);
  MPI_Comm_free(&node_comm);
  check(gathered, "MPI_Gather");
  if (leader_) {
    std::vector<std::optional<std::string>> visible;
    for (std::size_t i = 0; i < node_ranks_.size(); ++i) {
      const char* slot = node_visible.data() + i * kVisibleSlot;
      visible.push_back(slot[0] ? std::optional<std::string>(slot + 1) : std::nullopt);
    }
    try {
      auto monitor = open_monitor(node_, job_gpus_of(visible));
      own_roster_ = roster_of(node_, node_ranks_, *monitor);
      monitor_ = std::move(monitor);
    } catch (const std::exception& e) {
      open_error_ = fmt::format("its measurement could not start: {}", e.what());
    }
  }
  exchange_rosters();
}

// Once: each leader names its node's devices to rank 0, so that a window's
// message carries numbers only.
void MpiMonitor::exchange_rosters() {
  std::string payload;
  if (leader_) {
    nlohmann::json json = monitor_ ? to_json(own_roster_)
                                   : nlohmann::json{{"node", node_}, {"ranks", node_ranks_}, {"error", open_error_}};
    payload = json.dump();
  }
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
  if (rank_ != 0) return;
  for (int r = 0; r < size_; ++r) {
    const auto length_r = static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]);
    if (length_r == 0) continue;  // not a leader
    Leader leader;
    leader.rank = r;
    leader.roster.node = fmt::format("the node of rank {}", r);
    try {
      const auto json = nlohmann::json::parse(std::string(received.data() + offsets[static_cast<std::size_t>(r)], length_r));
      if (json.contains("error")) {
        leader.roster.node = json.value("node", leader.roster.node);
        leader.open_error = json.value("error", "no reason given");
      } else {
        leader.roster = node_report_from_json(json);
      }
    } catch (const std::exception& e) {
      leader.open_error = fmt::format("its roster is unreadable: {}", e.what());
    }
    leaders_.push_back(std::move(leader));
  }
}

MpiMonitor::~MpiMonitor() {
  for (auto& [request, bytes] : sends_) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
  // After a timeout some rank may never free its duplicate: do not wait on it.
  if (comm_ != MPI_COMM_NULL && !timed_out_) MPI_Comm_free(&comm_);
}

bool MpiMonitor::wait_for(MPI_Request& request, double timeout_s) {
  return poll_until(timeout_s, [&] {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  });
}

void MpiMonitor::check_in_step() const {
  if (timed_out_) {
    throw Error("an earlier window edge timed out waiting for other ranks: the job's ranks are out of step");
  }
}

void MpiMonitor::begin_window(const std::string& name) {
  check_in_step();
  MPI_Request barrier = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &barrier), "MPI_Ibarrier");
  if (!wait_for(barrier, options_.timeout_s)) {
    timed_out_ = true;
    throw Error(fmt::format("window '{}': not every rank began it within {:g} s", name, options_.timeout_s));
  }
  if (monitor_) monitor_->begin_window(name);
}

WindowMessage MpiMonitor::measure_window(const std::string& name, double settle_timeout_s, double edge_wall_s) {
  WindowMessage message;
  message.window_seq = window_seq_;
  message.edge_wall_s = edge_wall_s;
  if (!monitor_) {
    message.error = open_error_;
    return message;
  }
  try {
    const Measurement m = monitor_->end_window_settled(name, settle_timeout_s);
    message = window_message_of(window_seq_, *monitor_, m, edge_wall_s);
  } catch (const std::exception& e) {
    message.error = e.what();
  }
  return message;
}

std::optional<ClusterReport> MpiMonitor::end_window(const std::string& name, double settle_timeout_s) {
  check_in_step();
  ++window_seq_;
  MPI_Request barrier = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &barrier), "MPI_Ibarrier");
  // A rank that does not arrive leaves this barrier pending for good (a
  // collective's request may not be freed); the ranks are then out of step.
  if (!wait_for(barrier, options_.timeout_s)) timed_out_ = true;
  const double edge_wall_s = wall_s();
  std::optional<WindowMessage> own;
  if (leader_) {
    own = measure_window(name, settle_timeout_s, edge_wall_s);
    last_node_report_.reset();
    if (monitor_ && own->error.empty()) last_node_report_ = fill_roster(own_roster_, *own);
  }
  if (leader_ && rank_ != 0) {
    std::erase_if(sends_, [](auto& send) {
      int done = 0;
      MPI_Test(&send.first, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
    auto& [request, bytes] = sends_.emplace_back(MPI_REQUEST_NULL, encode(*own));
    check(MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, kMessageTag, comm_, &request),
          "MPI_Isend");
  }
  if (rank_ != 0) return std::nullopt;
  // The leaders settle their measurement first (up to settle_timeout_s).
  return assemble_cluster_report(name, size_, collect(*own, settle_timeout_s + options_.timeout_s));
}

// Rank 0: its own message and every other leader's that arrives in time.
std::vector<LeaderOutcome> MpiMonitor::collect(const WindowMessage& own, double timeout_s) {
  std::vector<LeaderOutcome> outcomes;
  std::vector<std::optional<WindowMessage>> messages(leaders_.size());
  std::size_t waiting = leaders_.size();
  for (std::size_t i = 0; i < leaders_.size(); ++i) {
    if (leaders_[i].rank == 0) {
      messages[i] = own;
      --waiting;
    }
  }
  std::vector<std::string> unreadable(leaders_.size());
  std::vector<bool> answered(leaders_.size());
  const bool all_arrived = poll_until(timeout_s, [&] {
    while (waiting > 0) {
      int arrived = 0;
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kMessageTag, comm_, &arrived, &status), "MPI_Iprobe");
      if (!arrived) return false;
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string bytes(static_cast<std::size_t>(count), '\0');
      check(MPI_Recv(bytes.data(), count, MPI_CHAR, status.MPI_SOURCE, kMessageTag, comm_, MPI_STATUS_IGNORE),
            "MPI_Recv");
      auto leader = std::find_if(leaders_.begin(), leaders_.end(),
                                 [&](const Leader& l) { return l.rank == status.MPI_SOURCE; });
      if (leader == leaders_.end()) continue;  // not a leader: ignore
      const auto i = static_cast<std::size_t>(leader - leaders_.begin());
      if (answered[i] || messages[i]) continue;
      try {
        WindowMessage message = decode_window_message(bytes);
        if (message.window_seq != window_seq_) continue;  // a late message of an earlier window
        messages[i] = std::move(message);
      } catch (const std::exception& e) {
        unreadable[i] = fmt::format("its message is unreadable: {}", e.what());
      }
      answered[i] = true;
      --waiting;
    }
    return true;
  });
  if (!all_arrived) timed_out_ = true;
  for (std::size_t i = 0; i < leaders_.size(); ++i) {
    const Leader& leader = leaders_[i];
    LeaderOutcome o{leader.rank, leader.roster.node, std::nullopt, "", std::nullopt};
    if (messages[i]) {
      o.edge_wall_s = messages[i]->edge_wall_s;
      try {
        if (!leader.open_error.empty()) throw Error(leader.open_error);
        o.report = fill_roster(leader.roster, *messages[i]);
      } catch (const std::exception& e) {
        o.missing_reason = e.what();
      }
    } else if (!unreadable[i].empty()) {
      o.missing_reason = unreadable[i];
    } else {
      o.missing_reason = fmt::format("no report within {:g} s (the node died, hangs, or is cut off)", timeout_s);
    }
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace joule::cluster
