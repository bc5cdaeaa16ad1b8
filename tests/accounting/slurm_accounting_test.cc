// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// sacct shows joule's figures: a real Slurm (slurmctld, slurmd, slurmdbd over
// MariaDB, munge; common/slurm_cluster.h) runs jobs whose tasks use the
// fake NVML's GPUs (they register as opening a CUDA context would); the
// real `joule exporter --ledger` accounts them; `joule slurm-epilog`, as
// EpilogSlurmctld, stores each job's energy in its AdminComment. Each
// comment is checked against the exporter's ledger: two jobs sharing the
// node (and a GPU) at once, a job cancelled, a job across a slurmd restart.
// Needs root, slurm-wlm, slurmdbd, mariadb-server and munge: skipped
// otherwise (failed where JOULE_TESTS_REQUIRE_SERVERS=1).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/slurm_cluster.h"
#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

// The exporter's accounting step in these tests, and the most a GPU draws.
constexpr double kStepS = 0.2;
constexpr double kGpu0W = 300.0, kGpu1W = 200.0;

struct Exporter {
  pid_t pid = -1;
  int port = 0;
};

// A RAPL package zone drawing 40 W while it runs, written as its driver
// would (a whole value replaced at once): the node's CPU energy.
class RaplFixture {
 public:
  explicit RaplFixture(const std::string& root) : zone_(root + "/intel-rapl:0") {
    testing::write_file(zone_ + "/name", "package-0\n");
    testing::write_file(zone_ + "/max_energy_range_uj", "262143328850\n");
    write(0);
    writer_ = std::thread([this] {
      const auto start = std::chrono::steady_clock::now();
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        write(static_cast<uint64_t>(40e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
      }
    });
  }
  ~RaplFixture() {
    stop_ = true;
    writer_.join();
  }

 private:
  void write(uint64_t uj) {
    testing::write_file(zone_ + "/energy_uj.new", std::to_string(uj) + "\n");
    std::filesystem::rename(zone_ + "/energy_uj.new", zone_ + "/energy_uj");
  }
  std::string zone_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

Exporter start_exporter(const TempDir& tmp, const testing::FakeNvml& fake) {
  const std::string port_file = tmp.file("port");
  Exporter exporter;
  exporter.pid = testing::start_process(
      {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file, "--interval-s", "0.2",
       "--jouled-socket", "", "--ledger", tmp.file("ledger.json")},
      {{"JOULE_NVML_LIBRARY", fake.library_path},
       {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"},
       {"JOULE_POWERCAP_ROOT", tmp.file("powercap")}},
      tmp.file("exporter.out"), tmp.file("exporter.err"));
  exporter.port = testing::wait_for_port_file(port_file);
  return exporter;
}

// The exporter's ledger for one job, from one GET /jobs: its GPU energy per
// step (summed over GPUs) and its CPU energy (summed over zones).
struct JobLedgerReply {
  std::map<std::string, double> steps;
  double cpu_j = 0.0;
};

JobLedgerReply ledger_of(int port, const std::string& job) {
  const nlohmann::json doc =
      nlohmann::json::parse(testing::http_get(fmt::format("http://127.0.0.1:{}/jobs?job=slurm/{}", port, job)));
  JobLedgerReply reply;
  for (const auto& entry : doc.at("jobs")) {
    reply.steps[entry.at("step").get<std::string>()] += entry.at("energy_j").get<double>();
  }
  for (const auto& entry : doc.at("cpu")) reply.cpu_j += entry.at("energy_j").get<double>();
  return reply;
}

double total(const std::map<std::string, double>& steps) {
  double sum = 0.0;
  for (const auto& [step, energy_j] : steps) sum += energy_j;
  return sum;
}

// joule's words in the job's AdminComment, by key; waits up to 30 s for
// the epilog to store them.
std::map<std::string, std::string> stored_figures(const testing::SlurmCluster& slurm, const std::string& job) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string comment;
  while (std::chrono::steady_clock::now() < deadline) {
    comment = run_process({"sacct", "-n", "-X", "-P", "-j", job, "-o", "AdminComment"}, slurm.env(), 30).out;
    if (comment.find("joule:") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::map<std::string, std::string> figures;
  const auto start = comment.find("joule:");
  if (start == std::string::npos) return figures;
  std::string token = comment.substr(start + 6);
  token = token.substr(0, token.find_first_of(" \n"));
  std::istringstream parts(token);
  for (std::string part; std::getline(parts, part, ',');) {
    const auto equals = part.find('=');
    if (equals != std::string::npos) figures[part.substr(0, equals)] = part.substr(equals + 1);
  }
  return figures;
}

std::string submit(const testing::SlurmCluster& slurm, const std::string& script, const std::string& tasks = "1") {
  const auto r = run_process({"sbatch", "--parsable", "--ntasks", tasks, "--output", "/dev/null", "--wrap", script},
                             slurm.env(), 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
  return id;
}

std::string state_of(const testing::SlurmCluster& slurm, const std::string& job) {
  const auto r = run_process({"sacct", "-n", "-X", "-P", "-j", job, "-o", "State"}, slurm.env(), 30);
  return r.out.substr(0, r.out.find_first_of(" \n"));
}

// Waits until the job is no longer pending or running (bounded).
void wait_until_ended(const testing::SlurmCluster& slurm, const std::string& job, double timeout_s = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto queue = run_process({"squeue", "-h", "-j", job, "-t", "PD,R,CG,CF,S", "-o", "%T"}, slurm.env(), 30);
    if (queue.out.find_first_not_of(" \n") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "job " << job << " still queued after " << timeout_s << " s";
}

// What the epilog stored against what the ledger holds: equal up to what the
// exporter charged after the epilog asked (at most a step or two of the
// GPUs' power, as the job's last processes end).
void expect_stored_matches_ledger(const std::map<std::string, std::string>& stored,
                                  const std::map<std::string, double>& ledger, const std::string& job) {
  ASSERT_TRUE(stored.count("gpu_energy_j")) << "job " << job << ": no joule figures in its AdminComment";
  const double stored_j = std::stod(stored.at("gpu_energy_j"));
  const double slack_j = 2 * kStepS * (kGpu0W + kGpu1W);
  EXPECT_GT(stored_j, 0) << job;
  EXPECT_LE(stored_j, total(ledger) + 0.1) << job;
  EXPECT_GE(stored_j, total(ledger) - slack_j) << job;
  for (const auto& [step, energy_j] : ledger) {
    const std::string key = "step_" + step + "_j";
    ASSERT_TRUE(stored.count(key)) << job << ": no " << key;
    EXPECT_NEAR(std::stod(stored.at(key)), energy_j, slack_j) << job << " " << key;
  }
  EXPECT_EQ(stored.at("nodes"), "1/1") << job;
}

TEST(SlurmAccountingTest, SacctShowsEachJobsEnergyFromTheLedger) {
  if (run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  for (const char* gpu : {"gpu0", "gpu1"}) {
    std::filesystem::create_directory(tmp.file(gpu));
    chmod(tmp.file(gpu).c_str(), 0777);
  }
  const RaplFixture rapl(tmp.file("powercap"));
  const auto fake = testing::use_fake_nvml(
      tmp, fmt::format("device name=\"NVIDIA H100 80GB HBM3\" power_w={}\ndevice name=\"NVIDIA H100 80GB HBM3\" power_w={}\n"
                       "process_dir device=0 path={}\nprocess_dir device=1 path={}\n",
                       kGpu0W, kGpu1W, tmp.file("gpu0"), tmp.file("gpu1")));
  // slurmctld takes its epilog only if the script is there when it starts:
  // what the script needs (the cluster's configuration, the exporter's port)
  // it reads from files written once they are known.
  const std::string epilog = tmp.file("epilog.sh");
  testing::write_file(epilog, fmt::format("#!/bin/sh\nexport SLURM_CONF=\"$(cat {})\"\n"
                                          "exec {} slurm-epilog --exporter-port \"$(cat {})\" >> {} 2>&1\n",
                                          tmp.file("slurm_conf"), JOULE_BINARY, tmp.file("port"), tmp.file("epilog.log")));
  chmod(epilog.c_str(), 0755);
  testing::SlurmCluster slurm({.accounting = true, .epilog_slurmctld = epilog});
  if (!slurm.running()) JOULE_SKIP_WITHOUT_SERVER(slurm.skip_reason());
  testing::write_file(tmp.file("slurm_conf"), slurm.env().at("SLURM_CONF"));
  const Exporter exporter = start_exporter(tmp, fake);
  testing::ProcessReaper reaper(exporter.pid);
  ASSERT_NE(exporter.port, 0) << testing::read_file(tmp.file("exporter.err"));
  const auto on_gpu = [&](const char* gpu, const std::string& then) {
    return fmt::format("touch {}/$$; exec {}", tmp.file(gpu), then);
  };

  // Two jobs at once: one's batch script on gpu0, the other's step 0 on gpu0
  // and gpu1 (an srun step of two tasks), so gpu0 is shared.
  // Busy on a CPU for 3 s in the registered process itself (bash's loop).
  const std::string alone = submit(slurm, on_gpu("gpu0", "bash -c 'while [ $SECONDS -lt 3 ]; do :; done'"));
  const std::string shared = submit(
      slurm, fmt::format("srun --ntasks 2 sh -c 'if [ $SLURM_PROCID = 0 ]; then g={}; else g={}; fi; touch $g/$$; exec sleep 3'",
                         tmp.file("gpu0"), tmp.file("gpu1")),
      "2");
  // Cancelled while it runs, once the ledger has charged it.
  const std::string cancelled = submit(slurm, on_gpu("gpu1", "sleep 60"));
  for (int i = 0; i < 100 && total(ledger_of(exporter.port, cancelled).steps) <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(total(ledger_of(exporter.port, cancelled).steps), 0)
      << testing::read_file(tmp.file("exporter.err"))
      << testing::http_get(fmt::format("http://127.0.0.1:{}/jobs", exporter.port))
      << run_process({"ls", "-l", tmp.file("gpu0"), tmp.file("gpu1")}).out
      << run_process({"squeue"}, slurm.env()).out << slurm.logs();
  ASSERT_EQ(run_process({"scancel", cancelled}, slurm.env(), 30).exit_code, 0);
  for (const std::string& job : {alone, shared, cancelled}) wait_until_ended(slurm, job);

  // The node daemon restarted while a job runs: the job goes on, and is accounted.
  const std::string across_restart = submit(slurm, on_gpu("gpu1", "sleep 3"));
  for (int i = 0; i < 100 && total(ledger_of(exporter.port, across_restart).steps) <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(slurm.restart_slurmd(), "");
  wait_until_ended(slurm, across_restart);

  for (const std::string& job : {alone, shared, cancelled, across_restart}) {
    const auto stored = stored_figures(slurm, job);
    const JobLedgerReply ledger = ledger_of(exporter.port, job);
    SCOPED_TRACE(testing::read_file(tmp.file("epilog.log")) + slurm.logs());
    expect_stored_matches_ledger(stored, ledger.steps, job);
    // The node has a RAPL zone: the job's CPU energy is stored too, as the ledger has it.
    ASSERT_TRUE(stored.count("cpu_energy_j")) << job;
    EXPECT_NEAR(std::stod(stored.at("cpu_energy_j")), ledger.cpu_j, 2 * kStepS * 40.0) << job;
  }
  // The busy job used about one CPU of the node's busy time: a good part of the 40 W.
  const JobLedgerReply alone_ledger = ledger_of(exporter.port, alone);
  EXPECT_GT(alone_ledger.cpu_j, 0.1 * 40 * 3) << testing::read_file(tmp.file("exporter.err"));
  EXPECT_EQ(alone_ledger.steps.count("batch"), 1u);
  EXPECT_EQ(ledger_of(exporter.port, shared).steps.count("0"), 1u);
  // ~3 s of gpu0 shared half and half at first, then whole GPU-seconds: at
  // least the alone job's half of gpu0 for its 3 s.
  EXPECT_GT(total(alone_ledger.steps), 0.5 * kGpu0W * 2.0);
  EXPECT_EQ(state_of(slurm, cancelled), "CANCELLED");
  EXPECT_EQ(state_of(slurm, across_restart), "COMPLETED");

  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("exporter.err"));
  reaper.waited();
}

}  // namespace
}  // namespace joule
