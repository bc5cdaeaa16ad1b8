// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule ledger`: what each job on this node cost, from the job ledger the
// exporter keeps (--ledger): its GPU energy in all, per GPU and per step, its
// CPU package and DRAM energy where the node has RAPL, and, with the carbon
// flags, the CO2e and price of both.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <map>

#include "cli/carbon_options.h"
#include "cli/commands.h"
#include "joule/accounting/ledger_file.h"
#include "joule/analyze/units_format.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule::cli {
namespace {

struct JobTotal {
  std::string user;
  double energy_j = 0.0;
  std::map<std::string, double> by_gpu_j;   // by uuid
  std::map<std::string, double> by_step_j;  // by Slurm step ("" where not known)
  double cpu_energy_j = 0.0;                // CPU package and DRAM, every zone
};

// "slurm/4711" matches "slurm/4711" and "4711"; "user/alice" matches "alice" too.
bool names_job(const std::string& wanted, const std::string& job) {
  if (wanted == job) return true;
  const auto slash = job.find('/');
  return slash != std::string::npos && job.substr(slash + 1) == wanted;
}

std::string utc_time(double unix_s) {
  const std::time_t seconds = static_cast<std::time_t>(unix_s);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

}  // namespace

int run_ledger(const LedgerCliOptions& o) {
  const LedgerContents contents = read_ledger_file(o.file);
  std::optional<carbon::Basis> basis;
  if (const carbon::Settings settings = o.carbon.settings(); settings.region || settings.g_per_kwh || settings.price_per_kwh) {
    basis = carbon::resolve(settings);
  }
  std::map<std::string, JobTotal> jobs;
  for (const auto& [key, energy_j] : contents.ledger.job_step_gpu_energy_j()) {
    if (!o.job.empty() && !names_job(o.job, key.job.job)) continue;
    JobTotal& total = jobs[key.job.job];
    total.user = key.job.user;
    total.energy_j += energy_j;
    total.by_gpu_j[contents.gpu_uuids.at(key.job.gpu)] += energy_j;
    total.by_step_j[key.step] += energy_j;
  }
  for (const auto& [key, energy_j] : contents.ledger.job_cpu_energy_j()) {
    if (!o.job.empty() && !names_job(o.job, key.job)) continue;
    JobTotal& total = jobs[key.job];
    total.user = key.user;
    total.cpu_energy_j += energy_j;
  }
  if (!o.job.empty() && jobs.empty()) {
    throw UsageError(fmt::format("no job '{}' in the ledger {} ({} jobs there; `joule ledger --file {}` lists them)",
                                 printable(o.job), o.file, contents.ledger.job_gpu_energy_j().size(), o.file));
  }
  if (o.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [job, total] : jobs) {
      nlohmann::json entry = {{"job", valid_utf8_or_printable(job)},
                              {"user", valid_utf8_or_printable(total.user)},
                              {"gpu_energy_j", total.energy_j},
                              {"by_gpu_j", total.by_gpu_j},
                              {"by_step_j", total.by_step_j},
                              {"cpu_energy_j", total.cpu_energy_j}};
      // Of all the job's energy: its GPUs' and its share of the CPU zones'.
      if (basis) entry["carbon"] = carbon_json(*basis, carbon::footprint(*basis, total.energy_j + total.cpu_energy_j));
      list.push_back(entry);
    }
    nlohmann::json gpus = nlohmann::json::array();
    for (std::size_t i = 0; i < contents.gpu_uuids.size(); ++i) {
      gpus.push_back({{"uuid", valid_utf8_or_printable(contents.gpu_uuids[i])},
                      {"energy_j", contents.ledger.gpu_energy_j(i)},
                      {"unattributed_j", contents.ledger.unattributed_j(i)}});
    }
    std::cout << nlohmann::json{{"ledger", o.file}, {"saved_unix_s", contents.saved_unix_s}, {"jobs", list}, {"gpus", gpus}}
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return 0;
  }
  std::cout << fmt::format("job ledger {} (saved {})\n", o.file, utc_time(contents.saved_unix_s));
  for (const auto& [job, total] : jobs) {
    std::cout << fmt::format("{:<28} {:<12} GPU energy {} ({})", printable(job), printable(total.user),
                             format_si(total.energy_j, "J"), format_watt_hours(total.energy_j));
    if (contents.ledger.cpu_zones() > 0) std::cout << fmt::format(", CPU {}", format_si(total.cpu_energy_j, "J"));
    if (basis) {
      const carbon::Footprint footprint = carbon::footprint(*basis, total.energy_j + total.cpu_energy_j);
      if (footprint.co2e_g) std::cout << fmt::format(", {} CO2e", format_si(*footprint.co2e_g, "g"));
      if (footprint.cost) std::cout << fmt::format(", {:.4g} {}", *footprint.cost, basis->currency);
    }
    std::cout << '\n';
    if (total.by_gpu_j.size() > 1) {
      for (const auto& [uuid, energy_j] : total.by_gpu_j) {
        std::cout << fmt::format("    {} {}\n", printable(uuid), format_si(energy_j, "J"));
      }
    }
  }
  if (o.job.empty()) {
    for (std::size_t i = 0; i < contents.gpu_uuids.size(); ++i) {
      std::cout << fmt::format("{}: {} in all, {} of it no job's\n", printable(contents.gpu_uuids[i]),
                               format_si(contents.ledger.gpu_energy_j(i), "J"),
                               format_si(contents.ledger.unattributed_j(i), "J"));
    }
  }
  if (basis) std::cout << fmt::format("carbon and cost at {}\n", basis_description(*basis));
  return 0;
}

}  // namespace joule::cli
