// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The exporter's accounting and text on simulated GPUs and a virtual clock,
// and its HTTP face through curl.
#include "joule/telemetry/energy_exporter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/scripted_gpu.h"
#include "common/test_support.h"
#include "joule/device/rapl.h"
#include "joule/device/sim.h"
#include "joule/error.h"
#include "joule/telemetry/metrics_server.h"

namespace joule {
namespace {

using testing::TempDir;

// The value of the one sample of `name` whose labels contain every one of
// `labels` (e.g. {"gpu=\"0\""}); fails the test when there is not exactly one.
double sample(const std::string& text, const std::string& name, const std::vector<std::string>& labels) {
  std::optional<double> found;
  int matches = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    const auto close = line.rfind('}');
    const std::string label_text = line.substr(name.size() + 1, close - name.size() - 1);
    if (!std::all_of(labels.begin(), labels.end(), [&](const auto& l) { return label_text.find(l) != std::string::npos; })) {
      continue;
    }
    ++matches;
    found = std::stod(line.substr(close + 2));
  }
  EXPECT_EQ(matches, 1) << name << " with " << ::testing::PrintToString(labels) << " in\n" << text;
  return found.value_or(-1);
}

// How many samples of `name` have every one of `labels`.
int count_samples(const std::string& text, const std::string& name, const std::vector<std::string>& labels = {}) {
  int matches = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    matches += std::all_of(labels.begin(), labels.end(), [&](const auto& l) { return line.find(l) != std::string::npos; });
  }
  return matches;
}

void fake_process(const TempDir& proc, uint32_t pid, const std::string& cgroup) {
  const std::string dir = proc.file(std::to_string(pid));
  std::filesystem::create_directories(dir);
  testing::write_file(dir + "/status", "Uid:\t0\t0\t0\t0\n");
  testing::write_file(dir + "/cgroup", cgroup);
}

struct Rig {
  TempDir proc;
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<SimGpu>> sims;
  std::unique_ptr<EnergyExporter> exporter;

  explicit Rig(std::optional<carbon::Basis> carbon = std::nullopt, std::function<DeviceHolders()> pods = {}) {
    for (unsigned i = 0; i < 2; ++i) sims.push_back(std::make_shared<SimGpu>(i, SimGpuModel{}, clock));
    ExporterOptions options;
    options.carbon = std::move(carbon);
    options.hostname = "node7";
    options.driver_version = "580.95.05";
    options.proc_root = proc.file("");
    options.sampler.background_thread = false;
    options.list_gpu_holders = std::move(pods);
    options.kubelet_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
    exporter = std::make_unique<EnergyExporter>(std::vector<std::shared_ptr<Gpu>>(sims.begin(), sims.end()),
                                                std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock, options);
  }
  // Ticks of 0.1 s, an accounting step every second.
  void run_s(double seconds) {
    for (int tick = 1; tick <= static_cast<int>(seconds * 10 + 0.5); ++tick) {
      clock->advance_s(0.1);
      exporter->sampler().sample_now();
      if (tick % 10 == 0) exporter->account_now();
    }
  }
};

TEST(EnergyExporterTest, CountsEachJobsGramsOfCo2eBesideItsEnergyWhenGivenAnIntensity) {
  carbon::Basis basis;
  basis.g_per_kwh = 400.0;
  basis.source = "user-given";
  basis.pue = 1.2;
  Rig rig(basis);
  fake_process(rig.proc, 100, "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  rig.sims[0]->set_load(1.0);  // 650 W
  rig.sims[0]->set_processes({{100, 1ull << 30}});
  rig.exporter->start();
  rig.run_s(10);
  const std::string text = rig.exporter->metrics_text();
  const double energy_j = sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\"", "gpu=\"0\""});
  EXPECT_NEAR(energy_j, 6500, 1);
  // 6500 J = 1.8056e-3 kWh x 1.2 x 400 g = 0.86667 g; exactly the energy counter's footprint.
  const double grams = sample(text, "joule_job_gpu_co2e_grams_total",
                              {"joule_job=\"slurm/4711\"", "user=\"root\"", "gpu=\"0\"", "Hostname=\"node7\""});
  EXPECT_NEAR(grams, 6500 / 3.6e6 * 1.2 * 400, 1e-3);
  EXPECT_NEAR(grams, energy_j / 3.6e6 * 1.2 * 400, 1e-9);
  EXPECT_DOUBLE_EQ(sample(text, "joule_carbon_intensity_grams_per_kwh", {"source=\"user-given\"", "pue=\"1.2\""}), 400);
  EXPECT_NE(text.find("# TYPE joule_job_gpu_co2e_grams_total counter"), std::string::npos);
  // Without an intensity: no carbon series.
  Rig plain;
  plain.exporter->start();
  plain.run_s(1);
  EXPECT_EQ(plain.exporter->metrics_text().find("co2e"), std::string::npos);
}

TEST(EnergyExporterTest, SplitsEachGpusEnergyOverItsProcessesJobs) {
  Rig rig;
  fake_process(rig.proc, 100, "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  fake_process(rig.proc, 200, "0::/user.slice/user-0.slice/session-3.scope\n");
  rig.sims[0]->set_load(1.0);  // 650 W
  rig.sims[0]->set_processes({{100, 1ull << 30}, {200, std::nullopt}});
  rig.exporter->start();
  rig.run_s(10);  // gpu1 idles at 70 W with no process
  std::string text = rig.exporter->metrics_text();
  EXPECT_NEAR(sample(text, "joule_gpu_energy_joules_total", {"gpu=\"0\""}), 6500, 1);
  EXPECT_NEAR(sample(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", {"gpu=\"0\""}), 6500e3, 1e3);
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\"", "user=\"root\"", "gpu=\"0\""}),
              3250, 1);
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"user/root\"", "gpu=\"0\""}), 3250, 1);
  EXPECT_NEAR(sample(text, "joule_gpu_unattributed_energy_joules_total", {"gpu=\"1\""}), 700, 1);
  EXPECT_NEAR(sample(text, "joule_gpu_unattributed_energy_joules_total", {"gpu=\"0\""}), 0, 1e-9);
  EXPECT_DOUBLE_EQ(sample(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"0\"", "Hostname=\"node7\"", "modelName=\"Simulated GPU (H100-like)\"",
                                                        "DCGM_FI_DRIVER_VERSION=\"580.95.05\""}),
                   650);
  EXPECT_DOUBLE_EQ(sample(text, "DCGM_FI_DEV_POWER_MGMT_LIMIT", {"gpu=\"1\""}), 700);
  EXPECT_DOUBLE_EQ(sample(text, "DCGM_FI_DEV_MEM_CLOCK", {"gpu=\"1\"", "pci_bus_id=\"00000000:19:00.0\""}), 2619);
  EXPECT_DOUBLE_EQ(sample(text, "joule_gpu_default_power_limit_watts", {"gpu=\"0\""}), 700);
  EXPECT_EQ(sample(text, "joule_gpu_up", {"gpu=\"0\""}), 1);

  // The session ends within a step: that step is still shared by both (it
  // was listed at the step's start), and from then on the job gets all of it.
  rig.sims[0]->set_processes({{100, 1ull << 30}});
  rig.run_s(10);
  text = rig.exporter->metrics_text();
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\"", "gpu=\"0\""}),
              3250 + 325 + 9 * 650, 1);
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"user/root\"", "gpu=\"0\""}), 3250 + 325, 1);
  EXPECT_EQ(sample(text, "joule_exporter_accounting_steps_total", {}), 20);

  // The job ends too: its last step is its own, not unattributed; then the
  // GPU's energy is nobody's.
  rig.sims[0]->set_processes({});
  rig.run_s(3);
  text = rig.exporter->metrics_text();
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\"", "gpu=\"0\""}),
              3250 + 325 + 10 * 650, 1);
  EXPECT_NEAR(sample(text, "joule_gpu_unattributed_energy_joules_total", {"gpu=\"0\""}), 2 * 650, 1);
  // A virtual clock is its own wall clock: the counters hold energy up to now.
  EXPECT_DOUBLE_EQ(sample(text, "joule_exporter_accounted_until_seconds", {}), rig.clock->now_s());
}

// With a ledger file, a restart goes on from the totals it had, and what
// the GPUs drew while no exporter ran (the simulated counters ran on) is
// charged from their energy counters to the processes listed before and
// after: nothing billed twice, nothing lost.
TEST(EnergyExporterTest, WithALedgerTheTotalsGoOnAcrossARestartAndTheTimeAwayIsCharged) {
  TempDir proc, state;
  fake_process(proc, 100, "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  auto clock = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<SimGpu>> sims;
  for (unsigned i = 0; i < 2; ++i) {
    sims.push_back(std::make_shared<SimGpu>(i, SimGpuModel{}, clock));
    gpus.push_back(sims.back());
  }
  sims[0]->set_load(1.0);  // 650 W; gpu1 idles at 70 W with no process
  sims[0]->set_processes({{100, 1ull << 30}});
  std::vector<std::string> log;
  ExporterOptions options;
  options.proc_root = proc.file("");
  options.sampler.background_thread = false;
  options.ledger_path = state.file("ledger.json");
  options.log = [&](const std::string& line) { log.push_back(line); };
  const auto run_s = [&](EnergyExporter& exporter, int seconds) {
    for (int tick = 1; tick <= seconds * 10; ++tick) {
      clock->advance_s(0.1);
      exporter.sampler().sample_now();
      if (tick % 10 == 0) exporter.account_now();
    }
  };
  {
    EnergyExporter first(gpus, {}, clock, options);
    first.start();
    run_s(first, 10);
    EXPECT_NEAR(sample(first.metrics_text(), "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\""}), 6500, 1);
  }  // stopped: the ledger is written
  clock->advance_s(5.0);  // no exporter: 3250 J on gpu0, 350 J on gpu1
  EnergyExporter second(gpus, {}, clock, options);
  second.start();
  run_s(second, 2);
  const std::string text = second.metrics_text();
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/4711\"", "gpu=\"0\""}),
              6500 + 3250 + 1300, 2);
  EXPECT_NEAR(sample(text, "joule_gpu_energy_joules_total", {"gpu=\"0\""}), 6500 + 3250 + 1300, 2);
  EXPECT_NEAR(sample(text, "joule_gpu_unattributed_energy_joules_total", {"gpu=\"1\""}), 700 + 350 + 140, 2);
  ASSERT_EQ(log.size(), 2u) << ::testing::PrintToString(log);
  EXPECT_NE(log[0].find("gpu0 (" + gpus[0]->uuid() + "): 3250.0 J drawn"), std::string::npos) << log[0];
  // A ledger another program mangled stops the start, naming it; it is kept.
  second.stop();
  testing::write_file(options.ledger_path.string(), "{\"joule_ledger\": 1, \"saved_unix_s\": -1}");
  try {
    EnergyExporter third(gpus, {}, clock, options);
    ADD_FAILURE() << "a mangled ledger was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ledger.json: the file.saved_unix_s: -1 is not a finite"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::read_file(options.ledger_path.string()), "{\"joule_ledger\": 1, \"saved_unix_s\": -1}");
}

// gpu1 is lost 5 s in (every reading fails, as NVML's GPU_IS_LOST): from
// then on it is served as down with why, in the text and once in the log,
// its counters stay where they were and nothing of it is served as read;
// gpu0 keeps counting.
TEST(EnergyExporterTest, ALostGpuIsDownWithWhyAndItsCountersStop) {
  TempDir proc;
  auto clock = std::make_shared<VirtualClock>();
  auto lost = std::make_shared<std::atomic<bool>>(false);
  auto sim = std::make_shared<SimGpu>(0, SimGpuModel{}, clock);  // idles at 70 W
  auto scripted = std::make_shared<testing::ScriptedGpu>(1, clock, [lost](double) {
    if (*lost) throw DeviceError(DeviceErrc::kDeviceLost, "scripted gpu1: GPU is lost");
    return 200.0;
  });
  std::vector<std::string> logged;
  ExporterOptions options;
  options.hostname = "node7";
  options.proc_root = proc.file("");
  options.sampler.background_thread = false;
  options.log = [&](const std::string& line) { logged.push_back(line); };
  EnergyExporter exporter({sim, scripted}, {}, clock, options);
  const auto run_s = [&](double seconds) {
    for (int tick = 1; tick <= static_cast<int>(seconds * 10 + 0.5); ++tick) {
      clock->advance_s(0.1);
      exporter.sampler().sample_now();
      if (tick % 10 == 0) exporter.account_now();
    }
  };
  exporter.start();
  run_s(5);
  const std::string before = exporter.metrics_text();
  EXPECT_EQ(sample(before, "joule_gpu_up", {"gpu=\"1\""}), 1);
  EXPECT_EQ(count_samples(before, "joule_gpu_down_info"), 0) << before;
  const double gpu1_j = sample(before, "joule_gpu_energy_joules_total", {"gpu=\"1\""});
  EXPECT_NEAR(gpu1_j, 1000, 25);
  EXPECT_TRUE(logged.empty());

  lost->store(true);
  run_s(3);
  const std::string after = exporter.metrics_text();
  EXPECT_EQ(sample(after, "joule_gpu_up", {"gpu=\"1\""}), 0);
  EXPECT_EQ(sample(after, "joule_gpu_up", {"gpu=\"0\""}), 1);
  EXPECT_EQ(sample(after, "joule_gpu_down_info", {"gpu=\"1\"", "GPU is lost"}), 1) << after;
  EXPECT_EQ(count_samples(after, "joule_gpu_down_info"), 1) << after;
  EXPECT_EQ(sample(after, "joule_gpu_energy_joules_total", {"gpu=\"1\""}), gpu1_j) << "frozen, not reset or grown";
  EXPECT_EQ(sample(after, "joule_gpu_unattributed_energy_joules_total", {"gpu=\"1\""}), gpu1_j);
  for (const char* reading : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_SM_CLOCK",
                              "joule_gpu_default_power_limit_watts"}) {
    EXPECT_EQ(count_samples(after, reading, {"gpu=\"1\""}), 0) << reading << " of a lost GPU\n" << after;
  }
  EXPECT_NEAR(sample(after, "joule_gpu_energy_joules_total", {"gpu=\"0\""}) -
                  sample(before, "joule_gpu_energy_joules_total", {"gpu=\"0\""}),
              3 * 70, 1);
  ASSERT_EQ(logged.size(), 1u) << ::testing::PrintToString(logged);
  EXPECT_NE(logged[0].find("gpu1"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("is down"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("GPU is lost"), std::string::npos) << logged[0];
  exporter.stop();
}

// Where the GPUs come from is served: no usable NVML is joule_nvml_up 0 and
// the backend "none" with why; simulated GPUs say so, and NVML is not asked.
TEST(EnergyExporterTest, ServesWhereItsGpusComeFromAndWhetherNvmlIsUp) {
  auto clock = std::make_shared<VirtualClock>();
  ExporterOptions options;
  options.hostname = "node7";
  options.sampler.background_thread = false;
  options.gpu_backend = "none";
  options.gpu_backend_reason = "no NVIDIA GPU usable: cannot load /x/libnvidia-ml.so.1";
  options.nvml_up = false;
  {
    EnergyExporter exporter({}, {}, clock, options);
    exporter.start();
    exporter.account_now();
    const std::string text = exporter.metrics_text();
    EXPECT_EQ(sample(text, "joule_nvml_up", {"Hostname=\"node7\""}), 0);
    EXPECT_EQ(sample(text, "joule_exporter_backend_info",
                     {"backend=\"none\"", "reason=\"no NVIDIA GPU usable: cannot load /x/libnvidia-ml.so.1\""}),
              1);
    EXPECT_EQ(count_samples(text, "DCGM_FI_DEV_POWER_USAGE"), 0) << text;
    EXPECT_EQ(count_samples(text, "joule_gpu_energy_joules_total"), 0) << text;
  }
  options.gpu_backend = "sim";
  options.gpu_backend_reason = "simulated GPUs requested";
  options.nvml_up.reset();
  EnergyExporter exporter({std::make_shared<SimGpu>(0, SimGpuModel{}, clock)}, {}, clock, options);
  exporter.start();
  const std::string text = exporter.metrics_text();
  EXPECT_EQ(sample(text, "joule_exporter_backend_info", {"backend=\"sim\""}), 1);
  EXPECT_EQ(count_samples(text, "joule_nvml_up"), 0) << "NVML was not asked\n" << text;
}

// A mixed node as the exporter sees it: an NVIDIA-like GPU (joule's gpu0) and
// two AMD ones (gpu1, gpu2), gpu2 being the node's second AMD GPU after
// --gpus left out gpu1. The AMD GPU is labelled by its vendor under
// dcgm-exporter's names and served under AMD's with the same numbers; the
// NVIDIA one is not; each library's up series and info are served as given;
// amd_metric_names=false drops AMD's names and nothing else.
TEST(EnergyExporterTest, ServesAmdGpusByTheirVendorsNamesAndLabels) {
  auto clock = std::make_shared<VirtualClock>();
  auto nvidia = std::make_shared<testing::ScriptedGpu>(0, clock, [](double) { return 300.0; });
  auto amd = std::make_shared<testing::ScriptedGpu>(2, clock, [](double) { return 250.0; });
  amd->backend_name = "rocm";
  amd->power_source = "average power";
  ExporterOptions options;
  options.hostname = "node7";
  options.driver_version = "580.95.05";
  options.sampler.background_thread = false;
  options.vendor_index = {{0, 0}, {1, 0}, {2, 1}};
  options.nvml_up = true;
  options.rocm_smi_up = true;
  options.gpu_libraries = {{"nvml", "/x/libnvidia-ml.so.1", "580.95.05", ""},
                           {"rocm_smi", "/x/librocm_smi64.so.1", "5.2.3", ""}};
  const auto text_after_10_s = [&](bool amd_names) {
    options.amd_metric_names = amd_names;
    EnergyExporter exporter({nvidia, amd}, {}, clock, options);
    exporter.start();
    for (int tick = 1; tick <= 100; ++tick) {
      clock->advance_s(0.1);
      exporter.sampler().sample_now();
      if (tick % 10 == 0) exporter.account_now();
    }
    return exporter.metrics_text();
  };
  const std::string text = text_after_10_s(true);
  EXPECT_EQ(sample(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"0\"", "device=\"nvidia0\"", "DCGM_FI_DRIVER_VERSION=\"580.95.05\""}),
            300);
  EXPECT_EQ(sample(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"2\"", "device=\"amd1\""}), 250);
  EXPECT_EQ(count_samples(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"2\"", "DCGM_FI_DRIVER_VERSION"}), 0) << text;
  const std::vector<std::string> amd1 = {"gpu_id=\"1\"", "gpu_uuid=\"scripted\"", "card_model=\"scripted\"",
                                         "hostname=\"node7\"", "gpu=\"2\""};
  EXPECT_EQ(sample(text, "gpu_power_usage", amd1), 250);
  EXPECT_EQ(sample(text, "gpu_average_package_power", amd1), 250);
  EXPECT_EQ(count_samples(text, "gpu_package_power"), 0) << "an average, not the current socket power\n" << text;
  EXPECT_EQ(sample(text, "gpu_gfx_activity", amd1), 50);
  EXPECT_EQ(sample(text, "gpu_umc_activity", amd1), 25);
  EXPECT_EQ(sample(text, "gpu_clock", {"clock_type=\"system\"", "gpu_id=\"1\""}), 1500);
  const double energy_j = sample(text, "joule_gpu_energy_joules_total", {"gpu=\"2\""});
  EXPECT_NEAR(energy_j, 2500, 1);
  EXPECT_NEAR(sample(text, "gpu_energy_consumed", amd1), energy_j * 1e6, 1e-6 * energy_j * 1e6);
  EXPECT_NE(text.find("# TYPE gpu_energy_consumed counter"), std::string::npos);
  EXPECT_EQ(sample(text, "gpu_nodes_total", {"hostname=\"node7\""}), 1);
  for (const char* amd_name : {"gpu_power_usage", "gpu_energy_consumed", "gpu_clock", "gpu_used_vram"}) {
    EXPECT_EQ(count_samples(text, amd_name, {"gpu=\"0\""}), 0) << amd_name << ": an NVIDIA GPU under AMD's names";
  }
  EXPECT_EQ(sample(text, "joule_rocm_smi_up", {"Hostname=\"node7\""}), 1);
  EXPECT_EQ(sample(text, "joule_gpu_library_info",
                   {"library=\"rocm_smi\"", "path=\"/x/librocm_smi64.so.1\"", "version=\"5.2.3\"", "problem=\"\""}),
            1);

  const std::string dcgm_only = text_after_10_s(false);
  EXPECT_EQ(dcgm_only.find("gpu_power_usage"), std::string::npos) << dcgm_only;
  EXPECT_EQ(dcgm_only.find("\ngpu_"), std::string::npos) << dcgm_only;
  EXPECT_EQ(sample(dcgm_only, "DCGM_FI_DEV_POWER_USAGE", {"device=\"amd1\""}), 250);
}

// Every family has its HELP and TYPE once, and every sample line parses.
TEST(EnergyExporterTest, TheTextIsPrometheusFormat) {
  Rig rig;
  rig.exporter->start();
  rig.run_s(2);
  const std::string text = rig.exporter->metrics_text();
  const std::regex help(R"(# HELP ([A-Za-z_:][A-Za-z0-9_:]*) .+)"), type(R"(# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) (gauge|counter))");
  const std::regex line(R"(([A-Za-z_:][A-Za-z0-9_:]*)\{([A-Za-z_][A-Za-z0-9_]*="([^"\\]|\\.)*",?)*\} [-+0-9.eE]+)");
  std::set<std::string> typed;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_match(l, m, type)) {
      EXPECT_TRUE(typed.insert(m[1]).second) << "TYPE twice: " << l;
    } else if (!std::regex_match(l, help)) {
      ASSERT_TRUE(std::regex_match(l, m, line)) << l;
      EXPECT_TRUE(typed.count(m[1])) << "a sample before its TYPE: " << l;
    }
  }
  EXPECT_GE(typed.size(), 12u);
}

// The kubelet's answer (here a function the test scripts): a GPU's series
// carry its container's labels, the container is billed the GPU's energy
// (split where time-sliced), a Kubernetes job is labelled with the container
// its processes ran in; while the kubelet cannot say, no container is
// billed and joule_kubelet_up says so, with why.
TEST(EnergyExporterTest, LabelsGpusAndJobsWithTheirKubernetesContainersAndBillsEachContainer) {
  const std::string uid = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";
  DeviceHolders holders;
  bool kubelet_answers = true;
  Rig rig(std::nullopt, [&] {
    if (!kubelet_answers) throw Error("the kubelet's pod resources at /x: no answer within 1 s (4)");
    return holders;
  });
  const KubernetesPod trainer{"ml", "trainer-0", "pytorch"};
  const KubernetesPod a{"ml", "notebook-a", "jupyter"}, b{"ml", "notebook-b", "jupyter"};
  holders[rig.sims[0]->uuid()] = {trainer};
  // The second GPU time-sliced by the device plugin: two shares of it, by uuid::N.
  holders[rig.sims[1]->uuid() + "::0"] = {a};
  holders[rig.sims[1]->uuid() + "::1"] = {b};
  holders["some-other-device"] = {KubernetesPod{"x", "y", "z"}};
  fake_process(rig.proc, 100, "0::/kubepods.slice/kubepods-pod" + uid + ".slice/cri-containerd-abc.scope\n");
  rig.sims[0]->set_load(1.0);  // 650 W
  rig.sims[0]->set_processes({{100, 1ull << 30}});
  rig.exporter->start();
  rig.run_s(10);
  std::string text = rig.exporter->metrics_text();
  const std::string trainer_labels = R"(namespace="ml",pod="trainer-0",container="pytorch")";
  EXPECT_EQ(sample(text, "joule_kubelet_up", {}), 1);
  EXPECT_EQ(count_samples(text, "joule_kubelet_down_info"), 0);
  EXPECT_EQ(count_samples(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"0\"", trainer_labels}), 1) << text;
  EXPECT_EQ(count_samples(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"1\"", "pod="}), 0) << text;  // two hold it
  const double gpu0_j = sample(text, "joule_gpu_energy_joules_total", {"gpu=\"0\""});
  const double gpu1_j = sample(text, "joule_gpu_energy_joules_total", {"gpu=\"1\""});
  EXPECT_NEAR(sample(text, "joule_pod_gpu_energy_joules_total", {trainer_labels}), gpu0_j, 1e-6);
  EXPECT_NEAR(sample(text, "joule_pod_gpu_energy_joules_total", {"pod=\"notebook-a\""}), gpu1_j / 2, 1e-6);
  EXPECT_NEAR(sample(text, "joule_pod_gpu_energy_joules_total", {"pod=\"notebook-b\""}), gpu1_j / 2, 1e-6);
  EXPECT_EQ(count_samples(text, "joule_pod_gpu_energy_joules_total", {"pod=\"y\""}), 0);
  EXPECT_NEAR(sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"kubernetes/" + uid + "\"", trainer_labels}),
              gpu0_j, 1e-6);

  // The pod ends and the kubelet stops answering: the containers' counters stop.
  kubelet_answers = false;
  rig.run_s(5);
  text = rig.exporter->metrics_text();
  EXPECT_EQ(sample(text, "joule_kubelet_up", {}), 0);
  EXPECT_NE(text.find("reason=\"the kubelet's pod resources at /x: no answer within 1 s (4)\""), std::string::npos) << text;
  EXPECT_NEAR(sample(text, "joule_pod_gpu_energy_joules_total", {trainer_labels}), gpu0_j, 1e-6);
  EXPECT_EQ(count_samples(text, "DCGM_FI_DEV_POWER_USAGE", {"pod="}), 0) << text;
  EXPECT_GT(sample(text, "joule_gpu_energy_joules_total", {"gpu=\"0\""}), gpu0_j + 1000);
}

// Two jobs' processes share a GPU, one using 3 times the SMs of the other
// by the driver's samples: the energy goes 3 to 1, and the exporter says so.
TEST(EnergyExporterTest, SplitsASharedGpuByItsProcessesUtilisation) {
  Rig rig;
  fake_process(rig.proc, 100, "0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_0\n");
  fake_process(rig.proc, 200, "0::/system.slice/slurmstepd.scope/job_2/step_0/user/task_0\n");
  rig.sims[0]->set_processes({{100, 1ull << 30}, {200, 1ull << 30}});
  rig.sims[0]->set_process_utilization({{100, 60.0}, {200, 20.0}});
  rig.sims[0]->set_load(1.0);
  rig.exporter->start();
  rig.run_s(10);
  const std::string text = rig.exporter->metrics_text();
  const double one_j = sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/1\""});
  const double two_j = sample(text, "joule_job_gpu_energy_joules_total", {"joule_job=\"slurm/2\""});
  EXPECT_NEAR(one_j / two_j, 3.0, 1e-9);
  EXPECT_NEAR(one_j + two_j, sample(text, "joule_gpu_energy_joules_total", {"gpu=\"0\""}), 1e-6);
  EXPECT_EQ(sample(text, "joule_gpu_energy_split_by_utilization", {"gpu=\"0\""}), 1);
  EXPECT_EQ(sample(text, "joule_gpu_energy_split_by_utilization", {"gpu=\"1\""}), 0);
}

// A RAPL package zone drawing 50 W: a Slurm job whose cgroup used a quarter
// of the node's busy CPU time is charged a quarter of its energy, and the
// ledger's /jobs says so; the rest is no job's.
TEST(EnergyExporterTest, SplitsACpuZonesEnergyAmongJobsByTheirCpuTime) {
  TempDir proc, cgroups, powercap;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::string job_dir = "/system.slice/slurmstepd.scope/job_77";
  std::filesystem::create_directories(proc.file("100"));
  testing::write_file(proc.file("100/status"), "Uid:\t0\t0\t0\t0\n");
  testing::write_file(proc.file("100/cgroup"), "0::" + job_dir + "/step_0/user/task_0\n");
  std::filesystem::create_directories(cgroups.file(job_dir.substr(1)));
  const auto set_cpu = [&](double node_busy_s, double job_s) {
    testing::write_file(proc.file("stat"), fmt::format("cpu  {} 0 0 99999 0 0 0 0\n", std::llround(node_busy_s * ticks)));
    testing::write_file(cgroups.file(job_dir.substr(1)) + "/cpu.stat", fmt::format("usage_usec {}\n", std::llround(job_s * 1e6)));
  };
  const auto set_energy_uj = [&](uint64_t uj) { testing::write_file(powercap.file("energy_uj"), std::to_string(uj) + "\n"); };
  set_cpu(0, 0);
  set_energy_uj(0);
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<SimGpu>(0, SimGpuModel{}, clock);
  gpu->set_processes({{100, 1ull << 30}});
  auto zone = std::make_shared<RaplZone>(powercap.path(), "package-0", CpuDomain::kPackage, 0, 1ull << 40);
  ExporterOptions options;
  options.proc_root = proc.path();
  options.cgroup_root = cgroups.path();
  options.sampler.background_thread = false;
  EnergyExporter exporter({gpu}, {zone}, clock, options);
  exporter.start();
  // 10 s at 50 W; each second the node is busy 4 CPU-seconds, the job 1.
  for (int tick = 1; tick <= 100; ++tick) {
    clock->advance_s(0.1);
    set_energy_uj(static_cast<uint64_t>(tick) * 5'000'000);
    exporter.sampler().sample_now();
    if (tick % 10 == 0) {
      set_cpu(4.0 * tick / 10, 1.0 * tick / 10);
      exporter.account_now();
    }
  }
  const std::string text = exporter.metrics_text();
  const double zone_j = sample(text, "joule_cpu_energy_joules_total", {"domain=\"package\""});
  const double job_j = sample(text, "joule_job_cpu_energy_joules_total", {"joule_job=\"slurm/77\"", "domain=\"package\""});
  // The first step only starts the counters: 9 of the 10 s are split.
  EXPECT_NEAR(zone_j, 500.0, 5.0);
  EXPECT_NEAR(job_j, 0.25 * 50 * 9, 5.0);
  const auto jobs = nlohmann::json::parse(exporter.jobs_json("slurm/77"));
  EXPECT_EQ(jobs["cpu_zones"], 1);
  ASSERT_EQ(jobs["cpu"].size(), 1u) << jobs.dump();
  EXPECT_NEAR(jobs["cpu"][0]["energy_j"].get<double>(), job_j, 1e-6);
}

// GET /jobs: the ledger per job, step and GPU, charged up to the request.
TEST(EnergyExporterTest, ServesTheLedgersJobsPerStepAsJson) {
  Rig rig;
  fake_process(rig.proc, 100, "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  fake_process(rig.proc, 101, "0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0\n");
  rig.sims[0]->set_processes({{100, 1ull << 30}, {101, 1ull << 30}});
  rig.sims[0]->set_load(1.0);
  rig.exporter->start();
  rig.run_s(10);
  const auto all = nlohmann::json::parse(rig.exporter->jobs_json(""));
  ASSERT_EQ(all["jobs"].size(), 2u) << all.dump();
  double total_j = 0;
  for (const auto& entry : all["jobs"]) {
    EXPECT_EQ(entry["job"], "slurm/4711");
    EXPECT_EQ(entry["gpu"], 0);
    total_j += entry["energy_j"].get<double>();
  }
  EXPECT_EQ(all["jobs"][0]["step"], "0");
  EXPECT_EQ(all["jobs"][1]["step"], "batch");
  EXPECT_NEAR(total_j, sample(rig.exporter->metrics_text(), "joule_gpu_energy_joules_total", {"gpu=\"0\""}), 1e-6);
  EXPECT_EQ(all["hostname"], "node7");
  EXPECT_TRUE(nlohmann::json::parse(rig.exporter->jobs_json("slurm/1"))["jobs"].empty());
  EXPECT_TRUE(nlohmann::json::parse(rig.exporter->jobs_json("\xff\xfe"))["jobs"].empty());
}

TEST(MetricsServerTest, ServesGetOnlyAndNothingElse) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  MetricsServer server([] { return std::string("joule_test_metric{a=\"b\"} 1\n"); }, "127.0.0.1", 0);
  std::thread serving([&] { server.run(); });
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  const auto status = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_process(argv).out;
  };
  for (int i = 0; i < 100 && status({base + "/healthz"}) != "200"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto metrics = testing::run_process({"curl", "-s", "-i", base + "/metrics"});
  EXPECT_NE(metrics.out.find("200 OK"), std::string::npos) << metrics.out;
  EXPECT_NE(metrics.out.find("text/plain; version=0.0.4"), std::string::npos) << metrics.out;
  EXPECT_NE(metrics.out.find("joule_test_metric{a=\"b\"} 1"), std::string::npos) << metrics.out;
  EXPECT_EQ(status({base + "/healthz"}), "200");
  EXPECT_EQ(status({base + "/"}), "404");
  EXPECT_EQ(status({base + "/metrics/x"}), "404");
  EXPECT_EQ(status({"-d", "x", base + "/metrics"}), "405");  // a POST
  EXPECT_EQ(status({"-X", "DELETE", base + "/healthz"}), "405");
  const auto post = testing::run_process({"curl", "-s", "-i", "-X", "PUT", "-d", "x", base + "/metrics"});
  EXPECT_NE(post.out.find("Allow: GET"), std::string::npos) << post.out;
  server.stop();
  serving.join();
}

}  // namespace
}  // namespace joule
