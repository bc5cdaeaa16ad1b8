// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule._joule's parts of one job on many nodes (joule.distributed moves
// them over torch.distributed): node names, each leader's message, the job's
// report, the GPUs a node's ranks use.
#include "module_support.h"

#include "joule/cluster/node_report.h"

namespace py = pybind11;
using namespace pybind11::literals;
using joule::python::PyMonitor;
using joule::python::open_devices;
using joule::python::python_of;

namespace {

// What rank 0 knows of one node's leader in a window: its rank, the node's
// name, the message it sent (None: nothing arrived) and why there is none.
using LeaderOutcomeTuple = std::tuple<int, std::string, std::optional<std::string>, std::string>;

}  // namespace

void bind_cluster(py::module_& m) {
  // One job on many nodes (joule.distributed): the parts of
  // include/joule/cluster/node_report.h that travel, as strings.
  m.def(
      "cluster_node_name", [](int world_rank) { return joule::cluster::node_name(world_rank); }, "world_rank"_a = -1,
      "The name of this process's node: $JOULE_NODE_NAME or the host name, with \"-<world_rank / K>\" appended "
      "under $JOULE_RANKS_PER_NODE=K.");
  m.def(
      "cluster_leader_message",
      [](PyMonitor& monitor, const joule::Measurement& measurement, const std::string& node,
         const std::vector<int>& ranks, double edge_wall_s, const std::vector<std::string>& warnings) {
        joule::cluster::NodeReport report = joule::cluster::node_report_of(node, ranks, monitor.monitor(), measurement);
        report.warnings.insert(report.warnings.end(), warnings.begin(), warnings.end());
        return joule::cluster::leader_message_json(report, edge_wall_s);
      },
      "monitor"_a, "measurement"_a, "node"_a, "ranks"_a, "edge_wall_s"_a, "warnings"_a = std::vector<std::string>{},
      "A node leader's message for a window (JSON): its devices' energy in the measurement, its ranks, the wall "
      "clock at the end edge, and warnings added to the measurement's.");
  m.def("cluster_visible_gpus", &joule::cluster::visible_gpus_from_environment,
        "This process's GPUs as its CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES name them, "
        "in one list for cluster_job_gpus (AMD entries written 'amd:<entry>'); None where none is set.");
  m.def("cluster_visible_gpus_of", &joule::cluster::visible_gpus_of, "cuda_visible"_a, "hip_visible"_a,
        "rocr_visible"_a,
        "cluster_visible_gpus() for the given values of CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and "
        "ROCR_VISIBLE_DEVICES (None: unset), as joule.process_layout reads a launcher's environment. Raises "
        "UsageError for a HIP index past ROCR's list.");
  m.def("cluster_job_gpus", &joule::cluster::job_gpus_of, "visible_per_rank"_a,
        "The GPUs a node's ranks may use, from each rank's cluster_visible_gpus() (None where it sees every GPU): "
        "None to measure all of the node's GPUs, else the entries (indices or UUIDs, AMD ones 'amd:...').");
  m.def(
      "cluster_monitor",
      [](const std::string& backend, const std::string& sim, const std::vector<std::string>& job_gpus,
         double interval_ms) {
        joule::Devices devices = open_devices(backend, sim, {});
        joule::cluster::keep_job_gpus(devices, job_gpus);
        return std::make_unique<PyMonitor>(std::move(devices), interval_ms, std::nullopt);
      },
      "backend"_a, "sim"_a, "job_gpus"_a, "interval_ms"_a,
      "A Monitor of the GPUs that job_gpus names (visible-device entries, each vendor's GPUs numbered by its own "
      "runtime, as cluster_job_gpus gives them) and all CPU zones. Raises UsageError for an entry that is no GPU here.");
  m.def("cluster_leader_error", &joule::cluster::leader_error_json, "node"_a, "error"_a, "edge_wall_s"_a,
        "A node leader's message (JSON) when its measurement failed: the node is reported missing with the error.");
  m.def(
      "cluster_report",
      [](const std::string& window, int world_size, const std::vector<LeaderOutcomeTuple>& outcomes) {
        std::vector<joule::cluster::LeaderOutcome> leaders;
        for (const auto& [rank, node, text, reason] : outcomes) {
          if (text) {
            leaders.push_back(joule::cluster::leader_outcome_from_json(rank, node, *text));
            if (leaders.back().report) leaders.back().node = leaders.back().report->node;
          } else {
            leaders.push_back({rank, node, std::nullopt, reason, std::nullopt});
          }
        }
        const joule::cluster::ClusterReport report = joule::cluster::assemble_cluster_report(window, world_size, leaders);
        return py::make_tuple(python_of(joule::cluster::to_json(report)), joule::cluster::to_text(report));
      },
      "window"_a, "world_size"_a, "outcomes"_a,
      "The job's report from its node leaders' outcomes, in rank order: (rank, node, message or None, why none). "
      "Returns (dict, text) as `joule measure --mpi` writes them (--json and the text report).");
}
