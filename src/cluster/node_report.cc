// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/cluster/node_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>
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

std::string node_file_path(const std::string& path, const std::string& node) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "." + node;
  return path.substr(0, dot) + "." + node + path.substr(dot);
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

NodeReport roster_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor) {
  NodeReport r;
  r.node = node;
  r.ranks = ranks;
  for (const auto& gpu : monitor.gpus()) {
    r.devices.push_back({"gpu", fmt::format("gpu{} {}", gpu->index(), gpu->name()), 0.0, gpu->simulated()});
  }
  for (const auto& zone : monitor.cpu_zones()) {
    r.devices.push_back({zone->domain() == CpuDomain::kPackage ? "cpu_package" : "dram", zone->label(), 0.0});
  }
  return r;
}

WindowMessage window_message_of(std::uint32_t window_seq, const Monitor& monitor, const Measurement& m,
                                double edge_wall_s) {
  WindowMessage message;
  message.window_seq = window_seq;
  message.elapsed_s = m.elapsed_s;
  message.edge_wall_s = edge_wall_s;
  message.warnings = m.warnings;
  message.devices_failed = !m.warnings.empty();  // a Measurement's warnings are devices that failed
  message.energies_j = m.gpu_energy_j;
  message.energies_j.resize(monitor.gpus().size(), 0.0);
  std::size_t package = 0, dram = 0;  // the zones in roster order, each kind from its own list
  for (const auto& zone : monitor.cpu_zones()) {
    message.energies_j.push_back(zone->domain() == CpuDomain::kPackage ? m.cpu_package_energy_j.at(package++)
                                                                       : m.dram_energy_j.at(dram++));
  }
  if (monitor.cpu_zones().empty()) message.warnings.push_back("no RAPL zones: CPU and DRAM energy not measured");
  return message;
}

NodeReport node_report_of(const std::string& node, const std::vector<int>& ranks, const Monitor& monitor,
                          const Measurement& m) {
  return fill_roster(roster_of(node, ranks, monitor), window_message_of(0, monitor, m, 0.0));
}

namespace {

constexpr std::uint32_t kMessageMarker = 0x4a574d31;  // "JWM1"; reads reversed on a host of the other byte order

class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    const auto* bytes = reinterpret_cast<const char*>(&value);
    out_.append(bytes, sizeof value);
  }
  void put_text(const std::string& text) {
    put(static_cast<std::uint32_t>(text.size()));
    out_ += text;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    T value;
    need(sizeof value, what);
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string get_text(const char* what) {
    const auto length = get<std::uint32_t>(what);
    need(length, what);
    std::string text = bytes_.substr(at_, length);
    at_ += length;
    return text;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void need(std::size_t n, const char* what) const {
    if (bytes_.size() - at_ < n) {
      throw Error(fmt::format("window message: ends at byte {} inside {} ({} bytes in all)", at_, what, bytes_.size()));
    }
  }
  const std::string& bytes_;
  std::size_t at_ = 0;
};

}  // namespace

std::string encode(const WindowMessage& m) {
  Writer w;
  w.put(kMessageMarker);
  w.put(m.window_seq);
  w.put(m.elapsed_s);
  w.put(m.edge_wall_s);
  w.put(static_cast<std::uint32_t>(m.energies_j.size()));
  for (const double e : m.energies_j) w.put(e);
  w.put(static_cast<std::uint32_t>(m.warnings.size()));
  for (const auto& warning : m.warnings) w.put_text(warning);
  w.put(static_cast<std::uint32_t>(m.devices_failed ? 1 : 0));
  w.put_text(m.error);
  return w.take();
}

WindowMessage decode_window_message(const std::string& bytes) {
  Reader r(bytes);
  const auto marker = r.get<std::uint32_t>("the marker");
  if (marker != kMessageMarker) {
    throw Error(fmt::format("window message: marker {:#010x}, not {:#010x} (another joule version, or a host of "
                            "another byte order)",
                            marker, kMessageMarker));
  }
  WindowMessage m;
  m.window_seq = r.get<std::uint32_t>("the window number");
  m.elapsed_s = r.get<double>("the elapsed time");
  m.edge_wall_s = r.get<double>("the edge time");
  const auto devices = r.get<std::uint32_t>("the device count");
  if (devices > 4096) throw Error(fmt::format("window message: {} devices is not a node", devices));
  for (std::uint32_t i = 0; i < devices; ++i) m.energies_j.push_back(r.get<double>("the energies"));
  const auto warnings = r.get<std::uint32_t>("the warning count");
  if (warnings > 4096) throw Error(fmt::format("window message: {} warnings is not a node's", warnings));
  for (std::uint32_t i = 0; i < warnings; ++i) m.warnings.push_back(r.get_text("a warning"));
  m.devices_failed = (r.get<std::uint32_t>("the flags") & 1) != 0;
  m.error = r.get_text("the error");
  if (!r.done()) throw Error("window message: bytes left over after the error text");
  return m;
}

NodeReport fill_roster(const NodeReport& roster, const WindowMessage& m) {
  if (!m.error.empty()) throw Error(m.error);
  if (m.energies_j.size() != roster.devices.size()) {
    throw Error(fmt::format("node '{}' sent {} energies for its {} devices", roster.node, m.energies_j.size(),
                            roster.devices.size()));
  }
  NodeReport r = roster;
  r.elapsed_s = m.elapsed_s;
  r.warnings = m.warnings;
  r.devices_failed = m.devices_failed;
  for (std::size_t i = 0; i < r.devices.size(); ++i) r.devices[i].energy_j = m.energies_j[i];
  return r;
}

namespace {

constexpr const char* kAmdPrefix = "amd:";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The AMD GPUs a process may use: ROCR_VISIBLE_DEVICES picks among the
// node's GPUs, then HIP_VISIBLE_DEVICES's indices count within what ROCR left.
std::vector<std::string> amd_visible(const std::optional<std::string>& hip, const std::optional<std::string>& rocr) {
  if (!rocr) return split_list(*hip);
  const std::vector<std::string> left = split_list(*rocr);
  if (!hip) return left;
  std::vector<std::string> picked;
  for (const std::string& item : split_list(*hip)) {
    if (!all_digits(item)) {
      picked.push_back(item);  // a UUID names its GPU whatever ROCR left
      continue;
    }
    const std::size_t position = std::stoul(item);
    if (position >= left.size()) {
      throw UsageError(fmt::format("HIP_VISIBLE_DEVICES names {}, but ROCR_VISIBLE_DEVICES ('{}') leaves {} GPU{}",
                                   item, *rocr, left.size(), left.size() == 1 ? "" : "s"));
    }
    picked.push_back(left[position]);
  }
  return picked;
}

// Whether an AMD GPU's unique id ("0x18ee07be9b5d9d3c") starts with what a
// ROCm UUID entry ("GPU-18ee07be...") names.
bool amd_uuid_matches(const Gpu& gpu, const std::string& entry) {
  std::string id = lowercase(gpu.uuid());
  if (id.rfind("0x", 0) == 0) id.erase(0, 2);
  std::string wanted = lowercase(entry);
  if (wanted.rfind("gpu-", 0) == 0) wanted.erase(0, 4);
  return !wanted.empty() && id.rfind(wanted, 0) == 0;
}

}  // namespace

std::optional<std::string> visible_gpus_of(const std::optional<std::string>& cuda_visible,
                                           const std::optional<std::string>& hip_visible,
                                           const std::optional<std::string>& rocr_visible) {
  const bool amd_set = hip_visible || rocr_visible;
  if (!cuda_visible && !amd_set) return std::nullopt;
  std::vector<std::string> entries = cuda_visible ? split_list(*cuda_visible) : std::vector<std::string>{"nvidia:all"};
  if (!amd_set) {
    entries.push_back(std::string(kAmdPrefix) + "all");
  } else {
    for (const std::string& item : amd_visible(hip_visible, rocr_visible)) entries.push_back(kAmdPrefix + item);
  }
  return fmt::format("{}", fmt::join(entries, ","));
}

std::optional<std::string> visible_gpus_from_environment() {
  const auto variable = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  return visible_gpus_of(variable("CUDA_VISIBLE_DEVICES"), variable("HIP_VISIBLE_DEVICES"),
                         variable("ROCR_VISIBLE_DEVICES"));
}

std::optional<std::vector<std::string>> job_gpus_of(const std::vector<std::optional<std::string>>& visible_per_rank) {
  std::vector<std::string> entries;
  for (const auto& visible : visible_per_rank) {
    if (!visible) return std::nullopt;  // this rank sees every GPU
    for (const std::string& item : split_list(*visible)) {
      if (item.rfind("MIG-", 0) == 0) return std::nullopt;  // a MIG slice: measure the whole node's GPUs
      if (std::find(entries.begin(), entries.end(), item) == entries.end()) entries.push_back(item);
    }
  }
  return entries;
}

void keep_job_gpus(Devices& devices, const std::vector<std::string>& entries) {
  std::vector<std::shared_ptr<Gpu>> kept;
  const auto keep = [&](const std::shared_ptr<Gpu>& gpu) {
    if (std::find(kept.begin(), kept.end(), gpu) == kept.end()) kept.push_back(gpu);
  };
  for (const std::string& entry : entries) {
    const bool amd = entry.rfind(kAmdPrefix, 0) == 0;
    const std::string item = amd ? entry.substr(std::strlen(kAmdPrefix)) : entry;
    if ((amd && item == "all") || entry == "nvidia:all") {
      for (const auto& gpu : devices.gpus) {
        if (is_amd_gpu(*gpu) == amd) keep(gpu);
      }
      continue;
    }
    const auto names = [&](const std::shared_ptr<Gpu>& gpu) {
      if (all_digits(item)) return is_amd_gpu(*gpu) == amd && std::to_string(vendor_index(devices, *gpu)) == item;
      return amd ? is_amd_gpu(*gpu) && amd_uuid_matches(*gpu, item) : gpu->uuid().rfind(item, 0) == 0;
    };
    const auto match = std::find_if(devices.gpus.begin(), devices.gpus.end(), names);
    if (match == devices.gpus.end()) {
      const auto count = std::count_if(devices.gpus.begin(), devices.gpus.end(),
                                       [&](const auto& gpu) { return is_amd_gpu(*gpu) == amd; });
      throw UsageError(fmt::format("{} names '{}', which is none of this node's {} {} GPU{}",
                                   amd ? "HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES", item,
                                   count, amd ? "AMD" : "NVIDIA", count == 1 ? "" : "s"));
    }
    keep(*match);
  }
  devices.gpus = std::move(kept);
}

nlohmann::json to_json(const NodeReport& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceEnergy& d : r.devices) {
    devices.push_back({{"kind", d.kind}, {"name", d.name}, {"energy_j", d.energy_j}, {"simulated", d.simulated}});
  }
  return {{"node", r.node},         {"ranks", r.ranks},     {"elapsed_s", r.elapsed_s},
          {"devices", devices},     {"warnings", r.warnings}, {"devices_failed", r.devices_failed},
          {"total_energy_j", r.total_energy_j()}};
}

NodeReport node_report_from_json(const nlohmann::json& json) {
  constexpr const char* kWhat = "node report";
  NodeReport r;
  r.node = field<std::string>(json, "node", kWhat);
  r.ranks = field<std::vector<int>>(json, "ranks", kWhat);
  r.elapsed_s = field<double>(json, "elapsed_s", kWhat);
  r.warnings = field<std::vector<std::string>>(json, "warnings", kWhat);
  r.devices_failed = json.contains("devices_failed") && field<bool>(json, "devices_failed", kWhat);
  const auto devices = field<nlohmann::json>(json, "devices", kWhat);
  if (!devices.is_array()) throw Error(fmt::format("{} of node '{}': 'devices' is not an array", kWhat, r.node));
  for (const auto& d : devices) {
    const std::string what = fmt::format("{} of node '{}', a device", kWhat, r.node);
    DeviceEnergy device{field<std::string>(d, "kind", what.c_str()), field<std::string>(d, "name", what.c_str()),
                        field<double>(d, "energy_j", what.c_str()),
                        d.contains("simulated") && field<bool>(d, "simulated", what.c_str())};
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

bool ClusterReport::complete() const {
  return missing_nodes.empty() &&
         std::none_of(nodes.begin(), nodes.end(), [](const NodeReport& n) { return n.devices_failed; });
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
          {"complete", r.complete()},
          {"gpu_energy_j", r.energy_j("gpu")},
          {"cpu_package_energy_j", r.energy_j("cpu_package")},
          {"dram_energy_j", r.energy_j("dram")},
          {"total_energy_j", r.total_energy_j()}};
}

std::string to_text(const ClusterReport& r) {
  std::string out = fmt::format("joule: '{}' on {} node{}, {} rank{}\n", r.window, r.nodes.size(),
                                r.nodes.size() == 1 ? "" : "s", r.world_size, r.world_size == 1 ? "" : "s");
  std::vector<std::string> simulated_on;
  for (const NodeReport& n : r.nodes) {
    if (std::any_of(n.devices.begin(), n.devices.end(), [](const DeviceEnergy& d) { return d.simulated; })) {
      simulated_on.push_back(n.node);
    }
  }
  if (!simulated_on.empty()) {
    out += fmt::format("joule: GPUs are SIMULATED on {} (joule's model, not measurements)\n",
                       simulated_on.size() == r.nodes.size() ? std::string("every node")
                                                             : "node " + fmt::format("{}", fmt::join(simulated_on, ", ")));
  }
  for (const NodeReport& n : r.nodes) {
    out += fmt::format("  node {} (rank{} {}): {:.3f} s, {:.1f} J\n", n.node, n.ranks.size() == 1 ? "" : "s",
                       fmt::join(n.ranks, ","), n.elapsed_s, n.total_energy_j());
    for (const DeviceEnergy& d : n.devices) {
      out += fmt::format("    {:<40} {:>12.1f} J  {:>8.1f} W\n", d.simulated ? d.name + " [SIMULATED]" : d.name, d.energy_j,
                         n.elapsed_s > 0 ? d.energy_j / n.elapsed_s : 0.0);
    }
    for (const std::string& w : n.warnings) out += fmt::format("    warning: {}\n", w);
  }
  for (const std::string& m : r.missing_nodes) out += fmt::format("  MISSING {}\n", m);
  out += fmt::format("  total: {:.1f} J (GPUs {:.1f} J, CPU packages {:.1f} J, DRAM {:.1f} J); node edges within {:.3f} ms\n",
                     r.total_energy_j(), r.energy_j("gpu"), r.energy_j("cpu_package"), r.energy_j("dram"),
                     1e3 * r.edge_skew_s);
  if (!r.missing_nodes.empty()) out += "  PARTIAL: the total leaves out the missing nodes\n";
  for (const NodeReport& n : r.nodes) {
    if (n.devices_failed) out += fmt::format("  PARTIAL: node {} lost a device inside the window (see its warnings)\n", n.node);
  }
  return out;
}

}  // namespace joule::cluster
