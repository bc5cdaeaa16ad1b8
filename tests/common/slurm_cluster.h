// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A throwaway single-machine Slurm for tests: Debian's munged, slurmctld and
// slurmd, configured in a fresh directory under /tmp (its own munge key and
// socket, slurm.conf, state, spool, logs) with one node of 8 CPUs and one
// partition `debug`, talking over free loopback ports. Clients (srun, sinfo,
// sbatch...) find it through SLURM_CONF, which env() sets. slurmd must be
// root to start steps, so when not root, or when a daemon is not installed,
// running() is false and skip_reason() says why: the tests skip with it
// (or fail, where JOULE_TESTS_REQUIRE_SERVERS=1). Destroying it cancels
// what still runs and stops the daemons within a bounded time.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

namespace joule::testing {

// With accounting: a MariaDB server of its own (mariadb-install-db into the
// cluster's directory, on a free loopback port) and slurmdbd over it, the
// cluster registered, so that sacct and sacctmgr work; and EpilogSlurmctld
// set to epilog_slurmctld where given. About a second more to start.
struct SlurmClusterOptions {
  bool accounting = false;
  std::string epilog_slurmctld = {};
};

class SlurmCluster {
 public:
  explicit SlurmCluster(SlurmClusterOptions options = {});
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool running() const { return skip_reason_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  // For run_process: SLURM_CONF pointing here, and the Slurm variables of a
  // job the tests may themselves run in unset (srun would join that job).
  const std::map<std::string, std::string>& env() const { return env_; }
  // The one node's Slurm name (not the machine's host name).
  static constexpr const char* kNodeName = "joule-node";
  static constexpr int kCpus = 8;
  // The last lines of the daemons' logs, for failure messages.
  std::string logs() const;
  // Stops slurmd (SIGTERM: its steps run on) and starts it again, as an
  // operator's restart of the node daemon does; waits until it is back.
  // "" when it is, else why not.
  std::string restart_slurmd();

 private:
  std::string start();
  std::string start_munged();
  std::string start_accounting(int slurmctld_port, int slurmd_port);  // MariaDB, slurmdbd; "" or why not
  void write_config(int slurmctld_port, int slurmd_port);
  std::string exited_daemon();
  std::string wait_until_listening(int slurmctld_port);
  std::string wait_until_idle();
  void cancel_jobs();
  void stop();

  std::string dir_;
  SlurmClusterOptions options_;
  int dbd_port_ = 0;
  pid_t munged_ = -1, slurmctld_ = -1, slurmd_ = -1, mariadbd_ = -1, slurmdbd_ = -1;
  std::map<std::string, std::string> env_;
  std::string skip_reason_;
};

// One cluster per test process, started on first use (well under a second
// here), shared by the tests of that process.
SlurmCluster& shared_slurm();

}  // namespace joule::testing
