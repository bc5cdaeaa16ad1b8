// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/accounting/ledger_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "joule/common/output_file.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule {

namespace {

constexpr int kFormatVersion = 1;

// Reads a ledger's fields, each error naming the file and the field.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw UsageError(fmt::format("{}: {}: {} (the job ledger is left as it is; move it aside to start afresh)", file_,
                                 field, why));
  }
  const nlohmann::json& member(const nlohmann::json& object, const std::string& field, const char* key) const {
    if (!object.is_object() || !object.contains(key)) fail(field, fmt::format("\"{}\" is missing", key));
    return object.at(key);
  }
  double non_negative(const nlohmann::json& object, const std::string& field, const char* key) const {
    const nlohmann::json& value = member(object, field, key);
    if (!value.is_number()) fail(field + "." + key, "not a number");
    const double joules = value.get<double>();
    if (!(std::isfinite(joules) && joules >= 0.0)) fail(field + "." + key, fmt::format("{} is not a finite, non-negative number", joules));
    return joules;
  }
  std::string text(const nlohmann::json& object, const std::string& field, const char* key) const {
    const nlohmann::json& value = member(object, field, key);
    if (!value.is_string()) fail(field + "." + key, "not a string");
    return value.get<std::string>();
  }
  const nlohmann::json& array(const nlohmann::json& object, const std::string& field, const char* key) const {
    const nlohmann::json& value = member(object, field, key);
    if (!value.is_array()) fail(field + "." + key, "not a list");
    return value;
  }
  uint32_t pid(const nlohmann::json& value, const std::string& field) const {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > 0x7fffffffu) fail(field, "not a process id");
    return static_cast<uint32_t>(value.get<uint64_t>());
  }

 private:
  std::string file_;
};

std::optional<JobIdentity::Scheduler> scheduler_named(const std::string& name) {
  for (const auto s : {JobIdentity::Scheduler::kSlurm, JobIdentity::Scheduler::kKubernetes, JobIdentity::Scheduler::kSystemd,
                       JobIdentity::Scheduler::kNone}) {
    if (name == to_string(s)) return s;
  }
  return std::nullopt;
}

KubernetesPod read_pod(const Reader& read, const nlohmann::json& entry, const std::string& field) {
  return {read.text(entry, field, "namespace"), read.text(entry, field, "pod"), read.text(entry, field, "container")};
}

nlohmann::json pod_json(const KubernetesPod& pod) {
  return {{"namespace", valid_utf8_or_printable(pod.namespace_name)},
          {"pod", valid_utf8_or_printable(pod.pod)},
          {"container", valid_utf8_or_printable(pod.container)}};
}

std::optional<std::size_t> index_of(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  return static_cast<std::size_t>(it - names.begin());
}

}  // namespace

LedgerFile::LedgerFile(std::filesystem::path path, std::vector<std::string> gpu_uuids,
                       std::vector<std::string> zone_labels)
    : path_(std::move(path)), gpu_uuids_(std::move(gpu_uuids)), zone_labels_(std::move(zone_labels)) {}

std::optional<nlohmann::json> LedgerFile::read_document(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (std::filesystem::exists(path)) throw UsageError(fmt::format("{}: cannot be read", path.string()));
    return std::nullopt;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  try {
    return nlohmann::json::parse(bytes.str());
  } catch (const nlohmann::json::exception& e) {
    Reader(path.string()).fail("the file", fmt::format("not JSON ({})", printable(e.what())));
  }
}

LedgerFile::Restored LedgerFile::load(JobLedger& into) {
  const std::optional<nlohmann::json> doc = read_document(path_);
  if (doc) return load(*doc, into);
  Restored none;
  none.marks.resize(gpu_uuids_.size());
  return none;
}

LedgerFile::Restored LedgerFile::load(const nlohmann::json& doc, JobLedger& into) {
  // Read whole into a fresh ledger: a file refused half-way restores nothing.
  JobLedger ledger(into.gpus(), into.cpu_zones());
  nlohmann::json carried_gpus = nlohmann::json::array(), carried_zones = nlohmann::json::array(),
                 carried_jobs = nlohmann::json::array(), carried_pods = nlohmann::json::array(),
                 carried_job_cpu = nlohmann::json::array();
  Restored restored;
  restored.marks.resize(gpu_uuids_.size());
  const Reader read(path_.string());
  if (!doc.is_object() || !doc.contains("joule_ledger")) read.fail("the file", "not a joule job ledger");
  if (doc.at("joule_ledger") != kFormatVersion) read.fail("joule_ledger", fmt::format("version {} is not {}", printable(doc.at("joule_ledger").dump()), kFormatVersion));
  restored.saved_unix_s = read.non_negative(doc, "the file", "saved_unix_s");

  const nlohmann::json& gpus = read.array(doc, "the file", "gpus");
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    const std::string field = fmt::format("gpus[{}]", k);
    const std::optional<std::size_t> i = index_of(gpu_uuids_, read.text(gpus[k], field, "uuid"));
    const double energy_j = read.non_negative(gpus[k], field, "energy_j");
    const double unattributed_j = read.non_negative(gpus[k], field, "unattributed_j");
    std::vector<uint32_t> pids;
    const nlohmann::json& listed = read.array(gpus[k], field, "listed_pids");
    for (std::size_t p = 0; p < listed.size(); ++p) pids.push_back(read.pid(listed[p], fmt::format("{}.listed_pids[{}]", field, p)));
    std::optional<CounterMark> mark;
    if (const nlohmann::json& m = read.member(gpus[k], field, "counter_mark"); !m.is_null()) {
      mark = CounterMark{read.non_negative(m, field + ".counter_mark", "counter_j"), read.non_negative(m, field + ".counter_mark", "accounted_j")};
    }
    if (!i) {
      carried_gpus.push_back(gpus[k]);
      continue;
    }
    ledger.restore_gpu(*i, energy_j, unattributed_j, std::move(pids));
    restored.marks[*i] = mark;
  }
  const nlohmann::json& zones = read.array(doc, "the file", "cpu_zones");
  for (std::size_t k = 0; k < zones.size(); ++k) {
    const std::string field = fmt::format("cpu_zones[{}]", k);
    const std::optional<std::size_t> z = index_of(zone_labels_, read.text(zones[k], field, "label"));
    const double energy_j = read.non_negative(zones[k], field, "energy_j");
    if (z) {
      ledger.restore_cpu(*z, energy_j);
    } else {
      carried_zones.push_back(zones[k]);
    }
  }
  const nlohmann::json& jobs = read.array(doc, "the file", "jobs");
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const std::string field = fmt::format("jobs[{}]", k);
    const std::string job = read.text(jobs[k], field, "job"), user = read.text(jobs[k], field, "user");
    const std::optional<std::size_t> i = index_of(gpu_uuids_, read.text(jobs[k], field, "gpu_uuid"));
    const double energy_j = read.non_negative(jobs[k], field, "energy_j");
    // Files before per-step totals have no step: the job's whole, step unknown.
    const std::string step = jobs[k].contains("step") ? read.text(jobs[k], field, "step") : std::string();
    if (i) {
      ledger.restore_job({{job, user, *i}, step}, energy_j);
    } else {
      carried_jobs.push_back(jobs[k]);
    }
  }
  // Files before pod labels have neither list.
  if (doc.contains("pods")) {
    const nlohmann::json& pods = read.array(doc, "the file", "pods");
    for (std::size_t k = 0; k < pods.size(); ++k) {
      const std::string field = fmt::format("pods[{}]", k);
      const KubernetesPod pod = read_pod(read, pods[k], field);
      const std::optional<std::size_t> i = index_of(gpu_uuids_, read.text(pods[k], field, "gpu_uuid"));
      const double energy_j = read.non_negative(pods[k], field, "energy_j");
      if (i) {
        ledger.restore_pod({pod, *i}, energy_j);
      } else {
        carried_pods.push_back(pods[k]);
      }
    }
  }
  if (doc.contains("job_cpu")) {
    const nlohmann::json& job_cpu = read.array(doc, "the file", "job_cpu");
    for (std::size_t k = 0; k < job_cpu.size(); ++k) {
      const std::string field = fmt::format("job_cpu[{}]", k);
      const std::string job = read.text(job_cpu[k], field, "job"), user = read.text(job_cpu[k], field, "user");
      const std::optional<std::size_t> z = index_of(zone_labels_, read.text(job_cpu[k], field, "zone"));
      const double energy_j = read.non_negative(job_cpu[k], field, "energy_j");
      if (z) {
        ledger.restore_job_cpu({job, user, *z}, energy_j);
      } else {
        carried_job_cpu.push_back(job_cpu[k]);
      }
    }
  }
  if (doc.contains("last_charged")) {
    const nlohmann::json& stamps = read.member(doc, "the file", "last_charged");
    if (!stamps.is_object()) read.fail("last_charged", "not an object");
    for (const auto& [key, value] : stamps.items()) ledger.restore_last_charged(key, read.non_negative(stamps, "last_charged", key.c_str()));
  }
  if (doc.contains("job_pods")) {
    const nlohmann::json& job_pods = read.array(doc, "the file", "job_pods");
    for (std::size_t k = 0; k < job_pods.size(); ++k) {
      const std::string field = fmt::format("job_pods[{}]", k);
      ledger.restore_job_pod(read.text(job_pods[k], field, "job"), read_pod(read, job_pods[k], field));
    }
  }
  const nlohmann::json& processes = read.array(doc, "the file", "processes");
  for (std::size_t k = 0; k < processes.size(); ++k) {
    const std::string field = fmt::format("processes[{}]", k);
    const uint32_t pid = read.pid(read.member(processes[k], field, "pid"), field + ".pid");
    if (read.member(processes[k], field, "job").is_null()) {
      ledger.restore_identity(pid, std::nullopt);
      continue;
    }
    const nlohmann::json& job = processes[k].at("job");
    JobIdentity id;
    const std::optional<JobIdentity::Scheduler> scheduler = scheduler_named(read.text(job, field + ".job", "scheduler"));
    if (!scheduler) read.fail(field + ".job.scheduler", "not slurm, kubernetes, systemd or none");
    id.scheduler = *scheduler;
    id.job_id = read.text(job, field + ".job", "job_id");
    id.user = read.text(job, field + ".job", "user");
    if (job.contains("step")) id.step = read.text(job, field + ".job", "step");
    ledger.restore_identity(pid, std::move(id));
  }
  into = std::move(ledger);
  carried_gpus_ = std::move(carried_gpus);
  carried_zones_ = std::move(carried_zones);
  carried_jobs_ = std::move(carried_jobs);
  carried_pods_ = std::move(carried_pods);
  carried_job_cpu_ = std::move(carried_job_cpu);
  restored.found = true;
  return restored;
}

void LedgerFile::save(const JobLedger& ledger, const std::vector<std::optional<CounterMark>>& marks,
                      double now_unix_s) const {
  nlohmann::json gpus = carried_gpus_;
  for (std::size_t i = 0; i < ledger.gpus(); ++i) {
    nlohmann::json mark;
    if (i < marks.size() && marks[i]) mark = {{"counter_j", marks[i]->counter_j}, {"accounted_j", marks[i]->accounted_j}};
    gpus.push_back({{"uuid", valid_utf8_or_printable(gpu_uuids_.at(i))},
                    {"energy_j", ledger.gpu_energy_j(i)},
                    {"unattributed_j", ledger.unattributed_j(i)},
                    {"listed_pids", ledger.listed_pids(i)},
                    {"counter_mark", mark}});
  }
  nlohmann::json zones = carried_zones_;
  for (std::size_t z = 0; z < ledger.cpu_zones(); ++z) {
    zones.push_back({{"label", zone_labels_.at(z)}, {"energy_j", ledger.cpu_energy_j(z)}});
  }
  nlohmann::json jobs = carried_jobs_;
  for (const auto& [key, energy_j] : ledger.job_step_gpu_energy_j()) {
    jobs.push_back({{"job", valid_utf8_or_printable(key.job.job)},
                    {"user", valid_utf8_or_printable(key.job.user)},
                    {"step", valid_utf8_or_printable(key.step)},
                    {"gpu_uuid", valid_utf8_or_printable(gpu_uuids_.at(key.job.gpu))},
                    {"energy_j", energy_j}});
  }
  nlohmann::json pods = carried_pods_;
  for (const auto& [key, energy_j] : ledger.pod_gpu_energy_j()) {
    nlohmann::json entry = pod_json(key.pod);
    entry["gpu_uuid"] = valid_utf8_or_printable(gpu_uuids_.at(key.gpu));
    entry["energy_j"] = energy_j;
    pods.push_back(std::move(entry));
  }
  nlohmann::json job_cpu = carried_job_cpu_;
  for (const auto& [key, energy_j] : ledger.job_cpu_energy_j()) {
    job_cpu.push_back({{"job", valid_utf8_or_printable(key.job)},
                       {"user", valid_utf8_or_printable(key.user)},
                       {"zone", valid_utf8_or_printable(zone_labels_.at(key.zone))},
                       {"energy_j", energy_j}});
  }
  nlohmann::json last_charged = nlohmann::json::object();
  for (const auto& [key, unix_s] : ledger.last_charged_unix_s()) last_charged[valid_utf8_or_printable(key)] = unix_s;
  nlohmann::json job_pods = nlohmann::json::array();
  for (const auto& [job, pod] : ledger.job_pods()) {
    nlohmann::json entry = pod_json(pod);
    entry["job"] = valid_utf8_or_printable(job);
    job_pods.push_back(std::move(entry));
  }
  nlohmann::json processes = nlohmann::json::array();
  for (const auto& [pid, id] : ledger.known_identities()) {
    nlohmann::json job;
    if (id) {
      job = {{"scheduler", to_string(id->scheduler)},
             {"job_id", valid_utf8_or_printable(id->job_id)},
             {"user", valid_utf8_or_printable(id->user)},
             {"step", valid_utf8_or_printable(id->step)}};
    }
    processes.push_back({{"pid", pid}, {"job", job}});
  }
  const nlohmann::json doc = {{"joule_ledger", kFormatVersion}, {"saved_unix_s", now_unix_s}, {"gpus", gpus},
                              {"cpu_zones", zones},           {"jobs", jobs},                {"pods", pods},
                              {"job_pods", job_pods},         {"job_cpu", job_cpu},          {"processes", processes},
                              {"last_charged", last_charged}};
  OutputFile out(path_.string());
  out.stream() << doc.dump(1) << '\n';
  out.commit();
}

LedgerContents read_ledger_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    throw UsageError(fmt::format("{}: no job ledger there (joule exporter --ledger writes one)", path.string()));
  }
  // The names first (the file's own GPUs and zones), then the whole through
  // the one reader, which checks every field.
  const nlohmann::json doc = LedgerFile::read_document(path).value_or(nlohmann::json());
  LedgerContents contents;
  const auto names = [&](const char* list, const char* key, std::vector<std::string>& out) {
    if (!doc.is_object() || !doc.contains(list) || !doc[list].is_array()) return;
    for (const nlohmann::json& entry : doc[list]) {
      if (entry.is_object() && entry.contains(key) && entry[key].is_string()) out.push_back(entry[key].get<std::string>());
    }
  };
  names("gpus", "uuid", contents.gpu_uuids);
  names("cpu_zones", "label", contents.zone_labels);
  contents.ledger = JobLedger(contents.gpu_uuids.size(), contents.zone_labels.size());
  contents.saved_unix_s = LedgerFile(path, contents.gpu_uuids, contents.zone_labels).load(doc, contents.ledger).saved_unix_s;
  return contents;
}

}  // namespace joule
