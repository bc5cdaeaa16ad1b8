// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What a collective window costs (issue 13's aggregation): every rank poses
// as its own node (JOULE_NODE_NAME = bench-node-RANK) with simulated GPUs,
// and rank 0 times begin_window + end_window, the barriers and the gather of
// every node's report included, over many windows. Run under mpirun:
//
//   mpirun -n 8 --oversubscribe build/bin/joule_bench_cluster_window [--windows N] [--gpus G]
//
// Prints the median, p90 and p99 of a window's cost at rank 0, and the size
// of one node's per-window message (and of its report as JSON).
#include <fmt/format.h>
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/cluster/mpi_monitor.h"
#include "joule/control/devices.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int windows = 2000, gpus = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--windows")) windows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gpus")) gpus = std::atoi(argv[i + 1]);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  setenv("JOULE_NODE_NAME", fmt::format("bench-node-{}", rank).c_str(), 1);
  {
    joule::cluster::MpiMonitor cluster(MPI_COMM_WORLD, [&](const std::string&, const auto&) {
      joule::DiscoveryOptions options;
      options.backend = joule::GpuBackend::kSim;
      options.sim_spec = fmt::format("count={},load=0.5", gpus);
      return std::make_unique<joule::Monitor>(joule::discover_devices(options));
    });
    std::vector<double> cost_us;
    std::size_t message_bytes = 0, json_bytes = 0;
    std::optional<joule::cluster::ClusterReport> last_report;
    for (int w = 0; w < windows + 100; ++w) {
      const auto start = std::chrono::steady_clock::now();
      cluster.begin_window("w");
      const auto report = cluster.end_window("w", 0.0);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (w >= 100) cost_us.push_back(us);  // the first hundred warm up
      if (report) last_report = report;
      if (report && !report->nodes.empty()) {
        // What a leader sends per window (numbers in roster order), and the
        // same report as JSON for comparison.
        const auto& node = report->nodes.front();
        joule::cluster::WindowMessage message;
        message.warnings = node.warnings;
        for (const auto& device : node.devices) message.energies_j.push_back(device.energy_j);
        message_bytes = joule::cluster::encode(message).size();
        json_bytes = to_json(node).dump().size();
      }
    }
    if (rank == 0 && last_report && !last_report->nodes.empty()) {
      // Rank 0's own work per node and window, apart from the network: check
      // a message and fill the node's roster with it.
      const auto& node = last_report->nodes.front();
      joule::cluster::NodeReport roster = node;
      joule::cluster::WindowMessage message;
      message.warnings = node.warnings;
      for (const auto& device : node.devices) message.energies_j.push_back(device.energy_j);
      const std::string bytes = joule::cluster::encode(message);
      constexpr int kRepeats = 20000;
      double checksum = 0.0;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kRepeats; ++i) {
        checksum += fill_roster(roster, joule::cluster::decode_window_message(bytes)).total_energy_j();
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      fmt::print("rank 0 decodes and files one node's message in {:.2f} us (checksum {:.0f})\n", us / kRepeats,
                 checksum / kRepeats);
    }
    if (rank == 0) {
      std::sort(cost_us.begin(), cost_us.end());
      auto at = [&](double q) { return cost_us[static_cast<std::size_t>(q * (cost_us.size() - 1))]; };
      fmt::print("{} ranks (as {} nodes), {} GPUs each, {} windows: begin+end median {:.1f} us, p90 {:.1f} us, "
                 "p99 {:.1f} us; a node's message {} bytes ({} as JSON)\n",
                 size, cluster.node_count(), gpus, windows, at(0.5), at(0.9), at(0.99), message_bytes, json_bytes);
    }
  }
  MPI_Finalize();
  return 0;
}
