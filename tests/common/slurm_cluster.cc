// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/slurm_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/test_support.h"

extern char** environ;

namespace joule::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kStartTimeoutS = 30.0;
constexpr double kStopTimeoutS = 5.0;
constexpr double kCancelTimeoutS = 10.0;

// The programs the cluster and its tests run, and the Debian package of each.
struct Program {
  const char* name;
  const char* package;
};
constexpr Program kPrograms[] = {{"munged", "munge"},     {"slurmctld", "slurm-wlm"}, {"slurmd", "slurm-wlm"},
                                 {"srun", "slurm-wlm"},   {"sinfo", "slurm-wlm"},     {"squeue", "slurm-wlm"},
                                 {"scancel", "slurm-wlm"}};

// Daemons live in sbin, which a non-root PATH often lacks.
std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/sbin:/sbin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string candidate = dirs.substr(begin, end - begin) + "/" + name;
    if (end > begin && access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

// And those of a cluster with accounting.
constexpr Program kAccountingPrograms[] = {{"mariadbd", "mariadb-server"}, {"mariadb-install-db", "mariadb-server"},
                                           {"slurmdbd", "slurmdbd"},       {"sacctmgr", "slurm-client"},
                                           {"sacct", "slurm-client"}};

// "" when every program is installed, else which one is missing.
std::string missing_program(bool accounting) {
  for (const auto& program : kPrograms) {
    if (find_program(program.name).empty()) {
      return fmt::format("no {} on PATH or in /usr/sbin (install Debian's {})", program.name, program.package);
    }
  }
  if (!accounting) return "";
  for (const auto& program : kAccountingPrograms) {
    if (find_program(program.name).empty()) {
      return fmt::format("no {} on PATH or in /usr/sbin (install Debian's {})", program.name, program.package);
    }
  }
  return "";
}

// CommunicationParameters=NoCtldInAddrAny,NoInAddrAny makes every daemon
// and srun bind the first IPv4 address of the host name instead of any
// address. That keeps the cluster on loopback only where the address is
// 127.0.0.1 itself: slurmstepd answers srun at the source address of its
// request, 127.0.0.1 for any loopback destination, so with 127.0.1.1
// (Debian's /etc/hosts) steps cannot connect their I/O, and with another
// address or none slurmctld cannot bind at all.
bool hostname_resolves_to_127_0_0_1() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return false;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &found) != 0 || found == nullptr) return false;
  const bool loopback = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  freeaddrinfo(found);
  return loopback;
}

// A fresh munge key: munged wants it owned by its user and unreadable by others.
void write_munge_key(const std::string& path) {
  unsigned char key[1024];
  if (getrandom(key, sizeof key, 0) != static_cast<ssize_t>(sizeof key)) throw std::runtime_error("getrandom failed");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0400);
  if (fd < 0 || write(fd, key, sizeof key) != static_cast<ssize_t>(sizeof key)) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot write the munge key " + path);
  }
  close(fd);
}

// Clusters of tests running at once must not number their jobs alike: Open
// MPI derives its job id from Slurm's, and ranks of two jobs with the same
// one share (and crash in) each other's shared-memory segments.
unsigned first_job_id() {
  unsigned value = 0;
  if (getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value))
    throw std::runtime_error("getrandom failed");
  return 1000 + value % 60'000'000;  // MaxJobId is 67,043,328
}

// Starts a daemon in the foreground as our child, its output to log_path.
// It gets SIGTERM should this process die first (a test killed on timeout),
// so no daemon outlives the tests.
pid_t spawn_daemon(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                   const std::string& log_path) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed for " + argv[0]);
  if (pid > 0) return pid;
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(126);
  for (const auto& [key, value] : env) value.empty() ? unsetenv(key.c_str()) : setenv(key.c_str(), value.c_str(), 1);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int null = open("/dev/null", O_RDONLY);
  if (log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) _exit(125);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// The daemon's shell-style exit status once it has exited (reaping it), else -1.
int exit_status_if_exited(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return -1;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// SIGTERM, then SIGKILL after kStopTimeoutS; always reaps it.
void stop_daemon(pid_t& pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStopTimeoutS);
  while (exit_status_if_exited(pid) < 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid = -1;
}

std::string last_lines(const std::string& path, size_t count) {
  const auto lines = read_lines(path);
  std::string text;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i) text += lines[i] + "\n";
  return text;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Whether something listens on TCP port `port` (any IPv4 address), from the
// kernel's table: a probing connection would make slurmctld log errors.
bool listening(int port) {
  const std::string suffix = fmt::format(":{:04X}", port);
  for (const auto& line : read_lines("/proc/net/tcp")) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    if (fields >> slot >> local >> remote >> state && state == "0A" && local.ends_with(suffix)) return true;
  }
  return false;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string word; in >> word;) result.push_back(word);
  return result;
}

// Our environment less the variables of a Slurm job we may run inside: srun
// would otherwise try to start a step of that job, unknown to our cluster.
std::map<std::string, std::string> client_env(const std::string& conf) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string name = std::string(*entry).substr(0, std::string(*entry).find('='));
    for (const char* prefix : {"SLURM_", "SALLOC_", "SBATCH_", "SRUN_"}) {
      if (name.rfind(prefix, 0) == 0) env[name] = "";
    }
  }
  env["SLURM_CONF"] = conf;
  return env;
}

}  // namespace

SlurmCluster::SlurmCluster(SlurmClusterOptions options) : options_(std::move(options)) {
  try {
    skip_reason_ = start();
  } catch (const std::exception& e) {
    skip_reason_ = e.what();
  }
  if (!skip_reason_.empty()) {
    skip_reason_ = "no Slurm cluster for the tests: " + skip_reason_;
    stop();
  }
}

SlurmCluster::~SlurmCluster() { stop(); }

// "" once the node is idle, else why the cluster could not be started.
std::string SlurmCluster::start() {
  if (geteuid() != 0) return "needs root to run slurmd and munged (slurmd starts each task as its user)";
  if (const std::string missing = missing_program(options_.accounting); !missing.empty()) return missing;
  // Under /tmp, not $TMPDIR: the Unix sockets made under it (munge's,
  // slurmstepd's, PMIx's) must stay within 108 characters.
  std::string pattern = "/tmp/joule-slurm-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed for " + pattern;
  dir_ = pattern;
  // munged warns of a socket directory that other users cannot reach.
  chmod(dir_.c_str(), 0755);
  for (const char* sub : {"state", "spool", "tmp"}) std::filesystem::create_directory(dir_ + "/" + sub);
  env_ = client_env(dir_ + "/slurm.conf");
  if (const std::string failed = start_munged(); !failed.empty()) return failed;
  const int ctld_port = free_loopback_port();
  int slurmd_port = free_loopback_port();
  while (slurmd_port == ctld_port) slurmd_port = free_loopback_port();
  if (options_.accounting) {
    if (const std::string failed = start_accounting(ctld_port, slurmd_port); !failed.empty()) return failed;
  }
  write_config(ctld_port, slurmd_port);
  const std::string conf = dir_ + "/slurm.conf";
  slurmctld_ = spawn_daemon({find_program("slurmctld"), "-D", "-f", conf}, env_, dir_ + "/slurmctld.out");
  // slurmd only once slurmctld listens: it would retry registering a second later.
  if (const std::string failed = wait_until_listening(ctld_port); !failed.empty()) return failed;
  // -N: the node's name in slurm.conf, whatever this machine's host name.
  slurmd_ = spawn_daemon({find_program("slurmd"), "-D", "-N", kNodeName, "-f", conf}, env_, dir_ + "/slurmd.out");
  return wait_until_idle();
}

// Starts munged with its own key, socket, pid, seed and log files here, and
// waits for its socket.
std::string SlurmCluster::start_munged() {
  const std::string key_dir = dir_ + "/munge-key", run_dir = dir_ + "/munge";
  if (mkdir(key_dir.c_str(), 0700) != 0 || mkdir(run_dir.c_str(), 0755) != 0)
    return "cannot make the munge directories in " + dir_;
  write_munge_key(key_dir + "/munge.key");
  munged_ = spawn_daemon({find_program("munged"), "--foreground", "--key-file=" + key_dir + "/munge.key",
                          "--socket=" + run_dir + "/munge.socket", "--pid-file=" + run_dir + "/munged.pid",
                          "--seed-file=" + run_dir + "/munged.seed", "--log-file=" + run_dir + "/munged.log"},
                         env_, dir_ + "/munged.out");
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStartTimeoutS);
  while (!std::filesystem::exists(run_dir + "/munge.socket")) {
    if (const int status = exit_status_if_exited(munged_); status >= 0) {
      munged_ = -1;
      return fmt::format("munged exited ({}) at start: {}", status, logs());
    }
    if (Clock::now() > deadline) return fmt::format("munged made no socket in {} s: {}", kStartTimeoutS, logs());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// Waits until `pid` listens on `port`; "" or why not (it exited, or the time ran out).
std::string wait_for_daemon(pid_t& pid, const char* name, int port, const std::string& logs_dir) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStartTimeoutS);
  while (!listening(port)) {
    if (const int status = exit_status_if_exited(pid); status >= 0) {
      pid = -1;
      return fmt::format("{} exited ({}) at start; see {}", name, status, logs_dir);
    }
    if (Clock::now() > deadline) return fmt::format("{} not listening on port {} after {} s", name, port, kStartTimeoutS);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// A MariaDB of the cluster's own (its data, socket and log here, root
// without a password on 127.0.0.1) and slurmdbd over it; then the cluster
// is registered, as an operator does once with sacctmgr.
std::string SlurmCluster::start_accounting(int slurmctld_port, int slurmd_port) {
  const std::string data = dir_ + "/mysql";
  const auto installed = run_process({find_program("mariadb-install-db"), "--no-defaults", "--datadir=" + data,
                                      "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"},
                                     env_, kStartTimeoutS);
  if (installed.exit_code != 0) return "mariadb-install-db failed: " + installed.out + installed.err;
  const int db_port = free_loopback_port();
  mariadbd_ = spawn_daemon({find_program("mariadbd"), "--no-defaults", "--datadir=" + data, "--user=root",
                            "--socket=" + dir_ + "/mysqld.sock", fmt::format("--port={}", db_port),
                            "--bind-address=127.0.0.1", "--skip-name-resolve", "--pid-file=" + dir_ + "/mysqld.pid",
                            "--log-error=" + dir_ + "/mysqld.err", "--innodb-buffer-pool-size=32M"},
                           env_, dir_ + "/mysqld.out");
  if (const std::string failed = wait_for_daemon(mariadbd_, "mariadbd", db_port, dir_); !failed.empty()) return failed + logs();
  dbd_port_ = free_loopback_port();
  // slurmdbd reads slurmdbd.conf beside SLURM_CONF's slurm.conf, and only
  // when no one else can read it (it may hold the database's password).
  const std::string conf = dir_ + "/slurmdbd.conf";
  write_file(conf, fmt::format(R"(# Written by the joule tests (tests/common/slurm_cluster.cc).
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
PidFile={dir}/slurmdbd.pid
LogFile={dir}/slurmdbd.log
)",
                               fmt::arg("dir", dir_), fmt::arg("dbd_port", dbd_port_), fmt::arg("db_port", db_port)));
  chmod(conf.c_str(), 0600);
  slurmdbd_ = spawn_daemon({find_program("slurmdbd"), "-D"}, env_, dir_ + "/slurmdbd.out");
  if (const std::string failed = wait_for_daemon(slurmdbd_, "slurmdbd", dbd_port_, dir_); !failed.empty()) return failed + logs();
  // sacctmgr reads the accounting address from slurm.conf: write it first.
  write_config(slurmctld_port, slurmd_port);
  const auto added = run_process({"sacctmgr", "-i", "add", "cluster", "joule-test"}, env_, kStartTimeoutS);
  if (added.exit_code != 0) return "sacctmgr add cluster failed: " + added.out + added.err + logs();
  return "";
}

void SlurmCluster::write_config(int slurmctld_port, int slurmd_port) {
  // Loopback only: where the host name is 127.0.0.1 the daemons and srun
  // listen there alone; elsewhere they listen on any address, but every
  // address in the configuration, and so every connection, is 127.0.0.1.
  const std::string bind = hostname_resolves_to_127_0_0_1()
                               ? "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
                               : "# Not NoCtldInAddrAny,NoInAddrAny: the host name is not 127.0.0.1.";
  // With accounting, jobs are recorded through slurmdbd (its munge socket
  // given as AccountingStoragePass, which the clients use too).
  std::string accounting = "AccountingStorageType=accounting_storage/none";
  if (options_.accounting) {
    accounting = fmt::format("AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                             "AccountingStoragePort={}\nAccountingStoragePass={}/munge/munge.socket",
                             dbd_port_, dir_);
    if (!options_.epilog_slurmctld.empty()) accounting += "\nEpilogSlurmctld=" + options_.epilog_slurmctld;
  }
  write_file(dir_ + "/slurm.conf",
             fmt::format(R"(# Written by the joule tests (tests/common/slurm_cluster.cc).
ClusterName=joule-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
{bind}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
TmpFS={dir}/tmp
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
# No cgroups (containers); nothing to account.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
{accounting}
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Not 1: see first_job_id().
FirstJobId={first_job}
# Cancelled steps are killed after 1 s, not 30: the cluster stops quickly.
KillWait=1
# More CPUs than this machine may have: slurmd accepts the node as written.
SlurmdParameters=config_overrides
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
)",
                         fmt::arg("ctld_port", slurmctld_port), fmt::arg("slurmd_port", slurmd_port),
                         fmt::arg("bind", bind), fmt::arg("dir", dir_), fmt::arg("accounting", accounting), fmt::arg("node", kNodeName),
                         fmt::arg("cpus", kCpus), fmt::arg("first_job", first_job_id())));
}

// Which daemon has exited, and how, with the logs; "" while all run.
std::string SlurmCluster::exited_daemon() {
  for (auto [pid, name] : {std::pair{&slurmctld_, "slurmctld"}, {&slurmd_, "slurmd"}, {&munged_, "munged"},
                           {&slurmdbd_, "slurmdbd"}, {&mariadbd_, "mariadbd"}}) {
    if (*pid <= 0) continue;
    if (const int status = exit_status_if_exited(*pid); status >= 0) {
      *pid = -1;
      return fmt::format("{} exited ({}) before the node came up: {}", name, status, logs());
    }
  }
  return "";
}

std::string SlurmCluster::wait_until_listening(int slurmctld_port) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStartTimeoutS);
  while (!listening(slurmctld_port)) {
    if (const std::string exited = exited_daemon(); !exited.empty()) return exited;
    if (Clock::now() > deadline) {
      return fmt::format("slurmctld not listening on port {} after {} s: {}", slurmctld_port, kStartTimeoutS, logs());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// "" once sinfo says the node is idle (slurmd registered), else why not.
std::string SlurmCluster::wait_until_idle() {
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStartTimeoutS);
  std::string state;
  while (Clock::now() < deadline) {
    if (const std::string exited = exited_daemon(); !exited.empty()) return exited;
    const auto r = run_process({"sinfo", "-h", "-o", "%t"}, env_, 10.0);
    state = trimmed(r.out + r.err);
    if (r.exit_code == 0 && state == "idle") return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fmt::format("node {} not idle after {} s (sinfo: '{}'): {}", kNodeName, kStartTimeoutS, state, logs());
}

// Cancels the jobs still there (a test killed mid-step) and waits until they
// are gone, so no slurmstepd or task outlives the cluster.
void SlurmCluster::cancel_jobs() {
  if (slurmctld_ <= 0 || slurmd_ <= 0) return;
  const auto deadline = Clock::now() + std::chrono::duration<double>(kCancelTimeoutS);
  bool cancelled = false;
  while (Clock::now() < deadline) {
    const auto queue = run_process({"squeue", "-h", "-o", "%i"}, env_, kStopTimeoutS);
    const auto ids = words(queue.out);
    if (queue.exit_code != 0 || ids.empty()) return;
    if (!cancelled) {
      std::vector<std::string> argv = {"scancel", "--quiet"};
      argv.insert(argv.end(), ids.begin(), ids.end());
      run_process(argv, env_, kStopTimeoutS);
      cancelled = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void SlurmCluster::stop() {
  try {
    cancel_jobs();
  } catch (const std::exception&) {
    // A client that hung is no reason to leave the daemons running.
  }
  // slurmd first: it reports its last steps to a slurmctld still there
  // instead of waiting for one.
  stop_daemon(slurmd_);
  stop_daemon(slurmctld_);
  stop_daemon(slurmdbd_);
  stop_daemon(mariadbd_);
  stop_daemon(munged_);
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  dir_.clear();
}

std::string SlurmCluster::logs() const {
  std::string text;
  for (const char* name :
       {"slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out", "munge/munged.log", "munged.out", "slurmdbd.log",
        "slurmdbd.out", "mysqld.err"}) {
    const std::string path = dir_ + "/" + name;
    if (std::filesystem::exists(path)) text += fmt::format("\n--- {} (last lines)\n{}", path, last_lines(path, 12));
  }
  return text;
}

std::string SlurmCluster::restart_slurmd() {
  stop_daemon(slurmd_);
  const std::string conf = dir_ + "/slurm.conf";
  slurmd_ = spawn_daemon({find_program("slurmd"), "-D", "-N", kNodeName, "-f", conf}, env_, dir_ + "/slurmd.out");
  // Back once slurmctld hears from it: the node answers sinfo as not down.
  const auto deadline = Clock::now() + std::chrono::duration<double>(kStartTimeoutS);
  while (Clock::now() < deadline) {
    if (const std::string exited = exited_daemon(); !exited.empty()) return exited;
    const auto r = run_process({"scontrol", "-o", "show", "node", kNodeName}, env_, 10.0);
    if (r.exit_code == 0 && r.out.find("State=DOWN") == std::string::npos &&
        r.out.find("NOT_RESPONDING") == std::string::npos && r.out.find("SlurmdStartTime=") != std::string::npos) {
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "slurmd not back after a restart: " + logs();
}

SlurmCluster& shared_slurm() {
  static SlurmCluster cluster;
  return cluster;
}

}  // namespace joule::testing
