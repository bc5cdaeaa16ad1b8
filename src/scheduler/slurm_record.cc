// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/scheduler/slurm_record.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "joule/common/command_output.h"
#include "joule/common/text.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule::slurm {
namespace {

// A Slurm client call answers within this, or slurmctld/slurmdbd is down.
constexpr double kClientTimeoutS = 30.0;
constexpr double kRetryEveryS = 0.5;

// A step as a comment word: "0", "batch"; "unknown" where the ledger had
// none; anything else Slurm would not name a step reduced to its letters.
std::string step_word(const std::string& step) {
  if (step.empty()) return "unknown";
  std::string word;
  for (const char c : step) {
    if (std::isalnum(static_cast<unsigned char>(c))) word += c;
  }
  return word.empty() ? "unknown" : word;
}

CommandOutput slurm_command(const std::vector<std::string>& argv) {
  CommandOutput out = run_command(argv, kClientTimeoutS);
  if (out.timed_out) throw Error(fmt::format("{}: no answer within {:g} s", argv[0], kClientTimeoutS));
  return out;
}

}  // namespace

NodeJobEnergy parse_jobs_reply(const std::string& body, const std::string& job_label, const std::string& where) {
  nlohmann::json reply;
  try {
    reply = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: the reply is not JSON ({})", where, e.what()));
  }
  if (!reply.is_object() || !reply.contains("jobs") || !reply["jobs"].is_array()) {
    throw Error(fmt::format("{}: the reply is not a joule exporter's /jobs (no \"jobs\" list)", where));
  }
  NodeJobEnergy energy;
  // Each entry of `list` that is job_label's: its energy, checked; adds it to total.
  const auto add_entries = [&](const char* list, const auto& add) {
    const nlohmann::json& entries = reply[list];
    for (std::size_t k = 0; k < entries.size(); ++k) {
      const nlohmann::json& entry = entries[k];
      const auto field = [&](const char* name) { return fmt::format("{}: {}[{}].{}", where, list, k, name); };
      if (!entry.is_object() || !entry.contains("job") || !entry["job"].is_string()) throw Error(field("job") + ": not text");
      if (entry["job"].get<std::string>() != job_label) continue;
      const nlohmann::json& joules = entry.value("energy_j", nlohmann::json());
      if (!joules.is_number() || !std::isfinite(joules.get<double>()) || joules.get<double>() < 0) {
        throw Error(field("energy_j") + ": not a finite number >= 0");
      }
      add(entry, joules.get<double>(), field);
    }
  };
  add_entries("jobs", [&](const nlohmann::json& entry, double joules, const auto& field) {
    const nlohmann::json& step = entry.value("step", nlohmann::json(""));
    if (!step.is_string()) throw Error(field("step") + ": not text");
    energy.gpu_energy_by_step_j[step.get<std::string>()] += joules;
  });
  // Exporters before CPU shares have no "cpu_zones": no CPU figure.
  const nlohmann::json zones = reply.value("cpu_zones", nlohmann::json(0u));
  if (!zones.is_number_unsigned()) throw Error(fmt::format("{}: cpu_zones: not a count", where));
  if (zones.get<uint64_t>() > 0) {
    if (!reply.contains("cpu") || !reply["cpu"].is_array()) throw Error(fmt::format("{}: cpu: not a list", where));
    energy.cpu_energy_j = 0.0;
    add_entries("cpu", [&](const nlohmann::json&, double joules, const auto&) { *energy.cpu_energy_j += joules; });
  }
  return energy;
}

std::vector<NodeJobEnergy> gather_job_energy(const std::string& job_label, const std::vector<Node>& nodes, int port,
                                             double timeout_s) {
  std::vector<NodeJobEnergy> gathered;
  const auto seconds = std::chrono::duration<double>(timeout_s);
  for (const Node& node : nodes) {
    NodeJobEnergy energy{node.name};
    const std::string where = fmt::format("the exporter on {} (http://{}:{}/jobs)", node.name, node.address, port);
    httplib::Client http(node.address, port);
    http.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(seconds));
    http.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(seconds));
    const httplib::Result reply = http.Get("/jobs", httplib::Params{{"job", job_label}}, httplib::Headers{});
    if (!reply) {
      energy.problem = fmt::format("{}: {}", where, httplib::to_string(reply.error()));
    } else if (reply->status != 200) {
      energy.problem = fmt::format("{}: HTTP {}", where, reply->status);
    } else {
      try {
        energy = parse_jobs_reply(reply->body, job_label, where);
        energy.node = node.name;
      } catch (const Error& e) {
        energy.problem = e.what();
      }
    }
    gathered.push_back(std::move(energy));
  }
  return gathered;
}

std::string joule_comment(const std::vector<NodeJobEnergy>& nodes) {
  std::map<std::string, double> by_step_j;
  double total_j = 0.0;
  std::optional<double> cpu_j;
  std::vector<std::string> missing;
  for (const NodeJobEnergy& node : nodes) {
    if (!node.problem.empty()) {
      missing.push_back(node.node);
      continue;
    }
    for (const auto& [step, energy_j] : node.gpu_energy_by_step_j) {
      by_step_j[step_word(step)] += energy_j;
      total_j += energy_j;
    }
    if (node.cpu_energy_j) cpu_j = cpu_j.value_or(0.0) + *node.cpu_energy_j;
  }
  std::string text = fmt::format("joule:gpu_energy_j={:.1f}", total_j);
  if (cpu_j) text += fmt::format(",cpu_energy_j={:.1f}", *cpu_j);
  for (const auto& [step, energy_j] : by_step_j) text += fmt::format(",step_{}_j={:.1f}", step, energy_j);
  text += fmt::format(",nodes={}/{}", nodes.size() - missing.size(), nodes.size());
  if (!missing.empty()) {
    text += ",missing=";
    for (std::size_t i = 0; i < missing.size(); ++i) text += (i ? "+" : "") + step_word(missing[i]);
  }
  return text;
}

std::string merged_admin_comment(const std::string& existing, const std::string& joule_token) {
  std::istringstream words(existing);
  std::string kept;
  for (std::string word; words >> word;) {
    if (word.rfind("joule:", 0) == 0) continue;
    kept += word + " ";
  }
  return kept + joule_token;
}

std::vector<Node> nodes_of(const std::string& nodelist) {
  const CommandOutput names = slurm_command({"scontrol", "show", "hostnames", nodelist});
  if (names.exit_status != 0) {
    throw Error(fmt::format("scontrol show hostnames '{}' failed ({}): {}", printable(nodelist), names.exit_status,
                            without_trailing_space(names.output)));
  }
  std::vector<Node> nodes;
  std::istringstream lines(names.output);
  for (std::string name; std::getline(lines, name);) {
    if (!name.empty()) nodes.push_back({name, name});
  }
  // Each node's NodeAddr: one call for all (a big job's nodes are many).
  const CommandOutput shown = slurm_command({"scontrol", "-o", "show", "node"});
  if (shown.exit_status != 0) {
    throw Error(fmt::format("scontrol show node failed ({}): {}", shown.exit_status,
                            without_trailing_space(shown.output)));
  }
  std::map<std::string, std::string> address_of;
  std::istringstream records(shown.output);
  for (std::string record; std::getline(records, record);) {
    std::string name, address;
    std::istringstream fields(record);
    for (std::string field; fields >> field;) {
      if (field.rfind("NodeName=", 0) == 0) name = field.substr(9);
      if (field.rfind("NodeAddr=", 0) == 0) address = field.substr(9);
    }
    if (!name.empty() && !address.empty()) address_of[name] = address;
  }
  for (Node& node : nodes) {
    if (const auto found = address_of.find(node.name); found != address_of.end()) node.address = found->second;
  }
  return nodes;
}

std::string stored_admin_comment(const std::string& job_id) {
  const CommandOutput shown = slurm_command({"sacct", "-n", "-X", "-P", "-j", job_id, "-o", "AdminComment"});
  if (shown.exit_status != 0) return "";
  std::istringstream lines(shown.output);
  std::string first;
  std::getline(lines, first);
  return without_trailing_space(first);
}

void store_admin_comment(const std::string& job_id, const std::string& comment, double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    const CommandOutput out = slurm_command(
        {"sacctmgr", "-i", "modify", "job", "where", "jobid=" + job_id, "set", "AdminComment=" + comment});
    // "Modified jobs..." once the record is there; until slurmdbd has the
    // job, "Nothing modified" (and status 0 or 1, by version).
    if (out.exit_status == 0 && out.output.find("Modified") != std::string::npos) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(fmt::format("sacctmgr modify job {} did not take the comment within {:g} s ({}): {}", job_id, wait_s,
                              out.exit_status, without_trailing_space(out.output)));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(kRetryEveryS));
  }
}

}  // namespace joule::slurm
