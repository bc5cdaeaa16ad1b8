// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Processes killed with SIGKILL at random points (seeded, a few rounds each):
// jouled while clients hold power-limit and clock leases on fake GPUs (the
// fake NVML's and the fake ROCm SMI's, tests/common/fake_drivers.h),
// and joule serve (SQLite) under asks and reports from several clients. After
// each kill the process is started again on the same state and checked: the
// GPUs' original settings are back (the fake's set-call log and jouled's own
// state), the store holds everything that was answered 2xx and nothing
// half-done, and the clients meanwhile get errors that say what happened.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/fake_drivers.h"
#include "common/jouled_process.h"
#include "common/test_support.h"
#include "joule/daemon/client.h"
#include "joule/error.h"
#include "joule/service/client.h"

namespace joule {
namespace {

using testing::TempDir;

// splitmix64: the same kill points on every platform and compiler.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform(double low, double high) { return low + (high - low) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// --- jouled ------------------------------------------------------------------

using Jouled = testing::JouledProcess;
constexpr const auto& kOriginalLimitW = testing::kJouledGpuLimitsW;

// jouled over each fake driver's GPUs.
class KillJouledTest : public ::testing::TestWithParam<testing::FakeDriver> {};

// A client process that changes limits and clocks at random until jouled
// goes away; it then writes the error it got to its pipe and exits.
struct LeaseClient {
  pid_t pid = -1;
  int from_child = -1;

  // Core clock locks from lowest_mhz up to 1980 MHz (every driver's top) in 15 MHz steps.
  static LeaseClient start(const std::string& socket, uint64_t seed, unsigned lowest_mhz) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    LeaseClient client;
    client.pid = fork();
    if (client.pid == 0) {
      close(fds[0]);
      std::string error = "no error";
      try {
        Rng rng{seed};
        daemon::DaemonClient daemon(socket);
        for (int i = 0; i < 1'000'000; ++i) {  // until jouled dies (bounded all the same)
          const unsigned gpu = static_cast<unsigned>(rng.next() % 3);
          nlohmann::json request = {{"op", "release"}, {"gpu", gpu}};
          const uint64_t op = rng.next() % 4;
          if (op <= 1) {
            request = {{"op", "set_power_limit"}, {"gpu", gpu}, {"limit_w", 100 + 5 * (rng.next() % 41)}};
          } else if (op == 2) {
            const unsigned steps = (1980 - lowest_mhz) / 15 + 1;
            const unsigned max_mhz = lowest_mhz + 15 * static_cast<unsigned>(rng.next() % steps);
            request = {{"op", "lock_clock"}, {"gpu", gpu}, {"domain", "sm"}, {"min_mhz", lowest_mhz}, {"max_mhz", max_mhz}};
          }
          try {
            daemon.call(request);
          } catch (const DeviceError& e) {
            if (e.code() != DeviceErrc::kInvalidArgument) throw;  // a release of a GPU not held: go on
          }
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      (void)!write(fds[1], error.data(), error.size());
      _exit(0);
    }
    close(fds[1]);
    client.from_child = fds[0];
    return client;
  }
  // What the child got when jouled went away (waits up to timeout_s).
  std::string error(double timeout_s = 10.0) {
    std::string out;
    pollfd p{from_child, POLLIN, 0};
    char buffer[1024];
    while (poll(&p, 1, static_cast<int>(timeout_s * 1000)) > 0) {
      const ssize_t n = read(from_child, buffer, sizeof buffer);
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
    }
    close(from_child);
    testing::wait_process(pid, 10);
    return out;
  }
};

// The fake's last power-limit set per GPU, from its set-call log.
std::map<int, double> last_limit_set_w(const Jouled& jouled) {
  std::map<int, double> last;
  for (const std::string& line : jouled.set_calls()) {
    if (const auto set = jouled.driver.power_limit_set(line)) last[set->first] = set->second;
  }
  return last;
}

// Rounds of: a client changing settings; jouled SIGKILLed at a random
// moment (and, every other round, once more right after it starts again,
// while it may be restoring); meanwhile the client and a new one get errors
// naming jouled; then jouled starts and every GPU is back where it was.
TEST_P(KillJouledTest, JouledKilledAtRandomPointsRestoresTheOriginalSettingsOnRestart) {
  const testing::FakeDriver& driver = GetParam();
  testing::JouledOptions options;
  options.driver = &driver;
  Jouled jouled(options);
  jouled.start();
  Rng rng{31};
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    LeaseClient client =
        LeaseClient::start(jouled.socket, 1000 + static_cast<uint64_t>(round), driver.core_clocks_mhz.front());
    sleep_s(rng.uniform(0.02, 0.3));
    jouled.kill_hard();
    const std::string client_error = client.error();
    EXPECT_NE(client_error.find("jouled at '" + jouled.socket + "'"), std::string::npos) << client_error;
    try {
      daemon::DaemonClient late(jouled.socket);
      ADD_FAILURE() << "connected to a dead jouled";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot connect to jouled at '" + jouled.socket + "'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("not running"), std::string::npos) << e.what();
    }
    if (round % 2 == 1) {  // killed again while it starts (recovering, or about to)
      jouled.start(/*wait=*/false);
      sleep_s(rng.uniform(0.0, 0.05));
      jouled.kill_hard();
    }
    jouled.start();
    daemon::DaemonClient check(jouled.socket);
    const nlohmann::json gpus = check.call({{"op", "state"}})["gpus"];
    ASSERT_EQ(gpus.size(), 3u);
    for (unsigned g = 0; g < 3; ++g) {
      EXPECT_EQ(gpus[g]["power_limit_w"].get<double>(), kOriginalLimitW[g]) << "gpu" << g << "\n" << jouled.log();
      EXPECT_TRUE(gpus[g]["held_by"].is_null()) << gpus[g].dump();
    }
    // What the GPUs hold, as the fake keeps it across processes (a GPU keeps
    // its settings when jouled dies): the original limits, no clock held.
    for (const auto& [g, held] : jouled.held()) {  // a GPU never changed is absent
      EXPECT_EQ(held.limit_w, kOriginalLimitW[g]) << "gpu" << g << " limit";
      EXPECT_FALSE(held.clocks_held) << "gpu" << g << " clocks held";
    }
    // Nothing is left to restore.
    const nlohmann::json state = nlohmann::json::parse(testing::read_file(jouled.state));
    EXPECT_TRUE(state["leases"].empty()) << state.dump();
  }
  // The driver saw the changes and the restores.
  const std::vector<std::string> calls = jouled.set_calls();
  const auto called = [&](const std::string& line) { return std::find(calls.begin(), calls.end(), line) != calls.end(); };
  bool clocks_reset = false;
  for (int g = 0; g < 3; ++g) {
    EXPECT_TRUE(called(driver.power_limit_log(g, static_cast<int>(kOriginalLimitW[g])).front()))
        << "gpu" << g << " never set back:\n" << testing::read_file(jouled.fake.log_path);
    clocks_reset |= called(driver.clock_reset_log(g).front());
  }
  EXPECT_TRUE(clocks_reset) << testing::read_file(jouled.fake.log_path);
}

// A driver that refuses jouled's calls: gpu1 refuses every limit, gpu0
// every limit after the first (so the restore at the lease's end fails).
// The client is told which GPU and the driver's words; a restore that fails
// is logged and kept in the state file, the GPU freed; a normal stop keeps
// it, and the next start puts the limit back.
TEST_P(KillJouledTest, ARestoreTheDriverRefusesIsKeptAndDoneOnTheNextStart) {
  testing::JouledOptions failing_restores;
  failing_restores.driver = &GetParam();
  failing_restores.fake_extra =
      "error function=@set_power_limit device=0 code=@unknown after_calls=1\n"
      "error function=@set_power_limit device=1 code=@unknown\n";
  Jouled jouled(failing_restores);
  jouled.start();
  {
    daemon::DaemonClient client(jouled.socket);
    client.call({{"op", "set_power_limit"}, {"gpu", 0}, {"limit_w", 200}});
    try {
      client.call({{"op", "set_power_limit"}, {"gpu", 1}, {"limit_w", 200}});
      ADD_FAILURE() << "the driver refused, jouled said yes";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("gpu1: " + GetParam().words.at("@set_power_limit") + " failed"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(jouled.gpus()[1]["power_limit_w"].get<double>(), 300.0);
  }  // the connection ends: gpu0's restore is refused
  for (int i = 0; i < 200 && jouled.log().find("FAILED to restore gpu0") == std::string::npos; ++i) sleep_s(0.01);
  EXPECT_NE(jouled.log().find("FAILED to restore gpu0"), std::string::npos) << jouled.log();
  nlohmann::json gpus = jouled.gpus();
  EXPECT_EQ(gpus[0]["power_limit_w"].get<double>(), 200.0);  // left changed, and free for others
  EXPECT_TRUE(gpus[0]["held_by"].is_null());
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(jouled.state))["leases"].size(), 1u);
  EXPECT_EQ(jouled.stop(), 0);
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(jouled.state))["leases"].size(), 1u);  // kept by a normal stop
  jouled.start();  // a new driver session: its first limit call is accepted
  gpus = jouled.gpus();
  EXPECT_EQ(gpus[0]["power_limit_w"].get<double>(), 300.0) << jouled.log();
  EXPECT_EQ(gpus[1]["power_limit_w"].get<double>(), 300.0);
  EXPECT_TRUE(nlohmann::json::parse(testing::read_file(jouled.state))["leases"].empty());
  EXPECT_EQ(last_limit_set_w(jouled)[0], 300.0);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, KillJouledTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

// --- joule serve ---------------------------------------------------------------

// A `joule serve` on a SQLite store and a free loopback port.
struct Serve {
  TempDir& dir;
  std::string store_path;
  pid_t pid = -1;
  int port = 0;
  int starts = 0;

  Serve(TempDir& d, std::string store) : dir(d), store_path(std::move(store)) {}
  ~Serve() {
    if (pid > 0) kill_hard();
  }
  void start() {
    const std::string port_file = dir.file("port" + std::to_string(starts));
    pid = testing::start_process({JOULE_BINARY, "serve", "--store", "sqlite:" + store_path, "--listen", "127.0.0.1:0",
                                  "--port-file", port_file},
                                 {}, dir.file("serve.out"), dir.file("serve.err" + std::to_string(starts)));
    ++starts;
    port = testing::wait_for_port_file(port_file);
  }
  void kill_hard() {
    kill(pid, SIGKILL);
    testing::wait_process(pid, 10);
    pid = -1;
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port); }
  std::string log() const {
    std::string all;
    for (int i = 0; i < starts; ++i) all += testing::read_file(dir.file("serve.err" + std::to_string(i)));
    return all;
  }
};

// What the clients were answered 2xx: recurrences asked, results reported.
struct Answered {
  std::mutex mutex;
  std::set<int64_t> asked;
  std::map<int64_t, double> reported_energy_j;
};

// Asks and reports as fast as the service answers, until it stops answering.
void ask_and_report(const std::string& url, const std::string& job, uint64_t seed, Answered& answered,
                    const std::atomic<bool>& stop) {
  Rng rng{seed};
  service::BatchSizeClient client(url, 2.0);
  while (!stop.load()) {
    try {
      const service::Assignment a = client.ask(job, fmt::format("node-{}", seed));
      {
        std::lock_guard lock(answered.mutex);
        answered.asked.insert(a.recurrence_id);
      }
      if (rng.next() % 5 == 0) continue;  // some recurrences never report (a crashed training job)
      service::RecurrenceResult result;
      result.energy_j = 1000.0 + static_cast<double>(rng.next() % 100000);
      result.time_s = 10.0 + static_cast<double>(rng.next() % 1000);
      result.reached_target = true;
      client.report(a.recurrence_id, result);
      std::lock_guard lock(answered.mutex);
      answered.reported_energy_j[a.recurrence_id] = result.energy_j;
    } catch (const std::exception&) {
      return;  // the service went away (or answered an error): this client is done
    }
  }
}

struct Row {
  bool finished = false;
  bool complete = false;  // finished with energy, time and cost, or unfinished with none of them
  double energy_j = 0.0;
};

std::map<int64_t, Row> stored_rows(const std::string& path, const std::string& job, int64_t* revision) {
  std::map<int64_t, Row> rows;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT id, finished_at IS NOT NULL, energy_j IS NOT NULL AND time_s IS NOT NULL AND cost IS NOT "
                     "NULL, energy_j IS NULL AND time_s IS NULL AND cost IS NULL, energy_j FROM recurrences WHERE job = ?",
                     -1, &statement, nullptr);
  sqlite3_bind_text(statement, 1, job.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(statement) == SQLITE_ROW) {
    Row row;
    row.finished = sqlite3_column_int(statement, 1) != 0;
    row.complete = row.finished ? sqlite3_column_int(statement, 2) != 0 : sqlite3_column_int(statement, 3) != 0;
    row.energy_j = sqlite3_column_double(statement, 4);
    rows[sqlite3_column_int64(statement, 0)] = row;
  }
  sqlite3_finalize(statement);
  sqlite3_prepare_v2(db, "SELECT revision FROM jobs WHERE name = ?", -1, &statement, nullptr);
  sqlite3_bind_text(statement, 1, job.c_str(), -1, SQLITE_TRANSIENT);
  *revision = sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

// Rounds of: four clients asking and reporting; joule serve SIGKILLed at a
// random moment; started again on the same store, which must hold every
// recurrence and result it answered 2xx for, each row whole, the job usable.
TEST(KillTest, ServeKilledAtRandomPointsUnderAsksAndReportsLosesNothingItAnswered) {
  TempDir tmp;
  Serve serve(tmp, tmp.file("jobs.db"));
  serve.start();
  ASSERT_GT(serve.port, 0) << serve.log();
  const std::string job = "kill-test";
  {
    service::BatchSizeClient client(serve.url());
    client.register_job(service::JobSpec::from_json(
        {{"name", job}, {"batch_sizes", {32, 64, 128, 256}}, {"default_batch_size", 64}, {"max_power_w", 300}}));
  }
  Answered answered;
  Rng rng{8};
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (uint64_t c = 0; c < 4; ++c) {
      clients.emplace_back(ask_and_report, serve.url(), job, 100 * static_cast<uint64_t>(round) + c,
                           std::ref(answered), std::cref(stop));
    }
    sleep_s(rng.uniform(0.1, 0.6));
    serve.kill_hard();
    stop.store(true);
    for (auto& t : clients) t.join();

    serve.start();  // on the same store
    ASSERT_GT(serve.port, 0) << serve.log();
    int64_t revision = 0;
    const std::map<int64_t, Row> rows = stored_rows(serve.store_path, job, &revision);
    std::lock_guard lock(answered.mutex);
    EXPECT_GE(rows.size(), answered.asked.size());
    for (const int64_t id : answered.asked) EXPECT_TRUE(rows.count(id)) << "recurrence " << id << " answered 201, lost";
    for (const auto& [id, energy_j] : answered.reported_energy_j) {
      const auto row = rows.find(id);
      ASSERT_NE(row, rows.end()) << "recurrence " << id;
      EXPECT_TRUE(row->second.finished) << "result of " << id << " answered 200, lost";
      EXPECT_EQ(row->second.energy_j, energy_j) << "recurrence " << id;
    }
    std::size_t finished = 0;
    for (const auto& [id, row] : rows) {
      EXPECT_TRUE(row.complete) << "recurrence " << id << " is half-written";
      finished += row.finished ? 1 : 0;
    }
    // The registration and every ask and report committed moved the job's
    // revision by one: the job's state and its rows were written together.
    EXPECT_EQ(revision, static_cast<int64_t>(1 + rows.size() + finished))
        << rows.size() << " rows, " << finished << " finished";
    // The job answers, and takes asks and reports again.
    service::BatchSizeClient client(serve.url());
    const nlohmann::json summary = client.job(job);
    EXPECT_EQ(summary["spec"]["name"], job) << summary.dump();
    EXPECT_FALSE(summary.contains("damage")) << summary.dump();
    EXPECT_EQ(summary["recurrences"].get<std::size_t>(), rows.size()) << summary.dump();
    EXPECT_EQ(summary["in_flight"].get<std::size_t>(), rows.size() - finished) << summary.dump();
    const service::Assignment a = client.ask(job);
    service::RecurrenceResult result;
    result.energy_j = 5000;
    result.time_s = 50;
    result.reached_target = true;
    client.report(a.recurrence_id, result);
    answered.asked.insert(a.recurrence_id);
    answered.reported_energy_j[a.recurrence_id] = 5000;
  }
  EXPECT_GT(answered.reported_energy_j.size(), 20u);  // the load was real
}

}  // namespace
}  // namespace joule
