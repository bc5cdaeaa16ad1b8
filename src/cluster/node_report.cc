#include "joule/cluster/node_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "joule/error.h"

namespace joule::cluster {

std::string node_name(int world_rank) {
  std::string name;
  if (const char* given = std::getenv("JOULE_NODE_NAME"); given && *given) {
    name = given;
  } else {
    char host[HOST_NAME_MAX + 1] = {};
    name = gethostname(host, sizeof host - 1) == 0 ? host : "unknown-host";
  }
  const char* per_node = std::getenv("JOULE_RANKS_PER_NODE");
  if (per_node && *per_node && world_rank >= 0) {
    char* end = nullptr;
    const long k = std::strtol(per_node, &end, 10);
    if (*end != '\0' || k < 1) {
      throw UsageError(fmt::format("JOULE_RANKS_PER_NODE='{}' is not a whole number from 1", per_node));
    }
    name += fmt::format("-{}", world_rank / k);
  }
  return name;
}

namespace {

double sum_of_kind(const std::vector<DeviceEnergy>& devices, const std::string& kind) {
  double sum = 0.0;
  for (const DeviceEnergy& d : devices) sum += kind.empty() || d.kind == kind ? d.energy_j : 0.0;
  return sum;
}

template <typename T>
T field(const nlohmann::json& json, const char* name, const char* what) {
  if (!json.is_object() || !json.contains(name)) throw Error(fmt::format("{}: no field '{}'", what, name));
  try {
    return json.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("{}: field '{}' has the wrong type ({})", what, name, json.at(name).type_name()));
  }
}

}  // namespace

double NodeReport::energy_j(const std::string& kind) const { return sum_of_kind(devices, kind); }
double NodeReport::total_energy_j() const { return sum_of_kind(devices, ""); }

NodeReport node_report_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor,
                          const Measurement& m) {
  NodeReport r;
  r.node = node;
  r.ranks = ranks;
  r.elapsed_s = m.elapsed_s;
  r.warnings = m.warnings;
  for (std::size_t i = 0; i < m.gpu_energy_j.size(); ++i) {
    const auto& gpu = monitor.gpus()[i];
    r.devices.push_back({"gpu", fmt::format("gpu{} {}", gpu->index(), gpu->name()), m.gpu_energy_j[i]});
  }
  std::size_t package = 0, dram = 0;
  for (const auto& zone : monitor.cpu_zones()) {
    if (zone->domain() == CpuDomain::kPackage) {
      r.devices.push_back({"cpu_package", zone->label(), m.cpu_package_energy_j.at(package++)});
    } else {
      r.devices.push_back({"dram", zone->label(), m.dram_energy_j.at(dram++)});
    }
  }
  if (monitor.cpu_zones().empty()) r.warnings.push_back("no RAPL zones: CPU and DRAM energy not measured");
  return r;
}

nlohmann::json to_json(const NodeReport& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceEnergy& d : r.devices) devices.push_back({{"kind", d.kind}, {"name", d.name}, {"energy_j", d.energy_j}});
  return {{"node", r.node},         {"ranks", r.ranks},     {"elapsed_s", r.elapsed_s},
          {"devices", devices},     {"warnings", r.warnings}, {"total_energy_j", r.total_energy_j()}};
}

NodeReport node_report_from_json(const nlohmann::json& json) {
  constexpr const char* kWhat = "node report";
  NodeReport r;
  r.node = field<std::string>(json, "node", kWhat);
  r.ranks = field<std::vector<int>>(json, "ranks", kWhat);
  r.elapsed_s = field<double>(json, "elapsed_s", kWhat);
  r.warnings = field<std::vector<std::string>>(json, "warnings", kWhat);
  const auto devices = field<nlohmann::json>(json, "devices", kWhat);
  if (!devices.is_array()) throw Error(fmt::format("{} of node '{}': 'devices' is not an array", kWhat, r.node));
  for (const auto& d : devices) {
    const std::string what = fmt::format("{} of node '{}', a device", kWhat, r.node);
    DeviceEnergy device{field<std::string>(d, "kind", what.c_str()), field<std::string>(d, "name", what.c_str()),
                        field<double>(d, "energy_j", what.c_str())};
    if (device.kind != "gpu" && device.kind != "cpu_package" && device.kind != "dram") {
      throw Error(fmt::format("{}: unknown kind '{}'", what, device.kind));
    }
    r.devices.push_back(std::move(device));
  }
  return r;
}

double ClusterReport::energy_j(const std::string& kind) const {
  double sum = 0.0;
  for (const NodeReport& n : nodes) sum += n.energy_j(kind);
  return sum;
}

double ClusterReport::total_energy_j() const {
  double sum = 0.0;
  for (const NodeReport& n : nodes) sum += n.total_energy_j();
  return sum;
}

ClusterReport assemble_cluster_report(const std::string& window, int world_size,
                                      const std::vector<LeaderOutcome>& outcomes) {
  ClusterReport report;
  report.window = window;
  report.world_size = world_size;
  std::vector<double> edges_wall_s;  // of the leaders that answered
  for (const LeaderOutcome& o : outcomes) {
    if (o.edge_wall_s) edges_wall_s.push_back(*o.edge_wall_s);
    if (o.report) {
      report.nodes.push_back(*o.report);
    } else {
      report.missing_nodes.push_back(fmt::format("{} (rank {}): {}", o.node, o.rank, o.missing_reason));
    }
  }
  if (!edges_wall_s.empty()) {
    const auto [first, last] = std::minmax_element(edges_wall_s.begin(), edges_wall_s.end());
    report.edge_skew_s = *last - *first;
  }
  return report;
}

std::string leader_message_json(const NodeReport& report, double edge_wall_s) {
  nlohmann::json json = to_json(report);
  json["edge_wall_s"] = edge_wall_s;
  return json.dump();
}

std::string leader_error_json(const std::string& node, const std::string& error, double edge_wall_s) {
  return nlohmann::json{{"node", node}, {"error", error}, {"edge_wall_s", edge_wall_s}}.dump();
}

LeaderOutcome leader_outcome_from_json(int rank, const std::string& node, const std::string& text) {
  LeaderOutcome o{rank, node, std::nullopt, "", std::nullopt};
  try {
    const auto json = nlohmann::json::parse(text);
    if (json.is_object() && json.contains("edge_wall_s") && json["edge_wall_s"].is_number()) {
      o.edge_wall_s = json["edge_wall_s"].get<double>();
    }
    if (json.is_object() && json.contains("error")) {
      o.missing_reason = json["error"].is_string() ? json["error"].get<std::string>() : "no reason given";
    } else {
      o.report = node_report_from_json(json);
    }
  } catch (const std::exception& e) {
    o.missing_reason = fmt::format("its report is unreadable: {}", e.what());
  }
  return o;
}

nlohmann::json to_json(const ClusterReport& r) {
  nlohmann::json nodes = nlohmann::json::array();
  double elapsed_s = 0.0;
  for (const NodeReport& n : r.nodes) {
    nodes.push_back(to_json(n));
    elapsed_s = std::max(elapsed_s, n.elapsed_s);
  }
  return {{"window", r.window},
          {"world_size", r.world_size},
          {"nodes", nodes},
          {"missing_nodes", r.missing_nodes},
          {"elapsed_s", elapsed_s},
          {"edge_skew_s", r.edge_skew_s},
          {"gpu_energy_j", r.energy_j("gpu")},
          {"cpu_package_energy_j", r.energy_j("cpu_package")},
          {"dram_energy_j", r.energy_j("dram")},
          {"total_energy_j", r.total_energy_j()}};
}

std::string to_text(const ClusterReport& r) {
  std::string out = fmt::format("joule: '{}' on {} node{}, {} rank{}\n", r.window, r.nodes.size(),
                                r.nodes.size() == 1 ? "" : "s", r.world_size, r.world_size == 1 ? "" : "s");
  for (const NodeReport& n : r.nodes) {
    out += fmt::format("  node {} (rank{} {}): {:.3f} s, {:.1f} J\n", n.node, n.ranks.size() == 1 ? "" : "s",
                       fmt::join(n.ranks, ","), n.elapsed_s, n.total_energy_j());
    for (const DeviceEnergy& d : n.devices) {
      out += fmt::format("    {:<40} {:>12.1f} J  {:>8.1f} W\n", d.name, d.energy_j,
                         n.elapsed_s > 0 ? d.energy_j / n.elapsed_s : 0.0);
    }
    for (const std::string& w : n.warnings) out += fmt::format("    warning: {}\n", w);
  }
  for (const std::string& m : r.missing_nodes) out += fmt::format("  MISSING {}\n", m);
  out += fmt::format("  total: {:.1f} J (GPUs {:.1f} J, CPU packages {:.1f} J, DRAM {:.1f} J); node edges within {:.3f} ms\n",
                     r.total_energy_j(), r.energy_j("gpu"), r.energy_j("cpu_package"), r.energy_j("dram"),
                     1e3 * r.edge_skew_s);
  if (!r.missing_nodes.empty()) out += "  PARTIAL: the total leaves out the missing nodes\n";
  return out;
}

}  // namespace joule::cluster
