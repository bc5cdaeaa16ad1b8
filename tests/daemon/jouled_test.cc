// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// jouled end to end: the real daemon binary over each fake GPU library (the
// fake NVML and the fake ROCm SMI, tests/common/fake_drivers.h), with real
// client processes (forked; one drops to the unprivileged user "nobody"),
// SIGKILLs, restarts and a flood of malformed messages.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/jouled_process.h"
#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/control/devices.h"
#include "joule/daemon/client.h"
#include "joule/device/discovery.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace joule {
namespace {

using daemon::DaemonClient;
using testing::TempDir;

// The daemon over driver's GPUs with an access rule: "nobody" may use gpu1 only.
testing::JouledOptions with_access_rule(const testing::FakeDriver& driver) {
  testing::JouledOptions options;
  options.driver = &driver;
  options.config_extra = R"("allow": [{"user": "nobody", "gpus": [1]}])";
  options.socket_mode = "0666";
  options.others_reach_socket = true;
  return options;
}

struct Jouled : testing::JouledProcess {
  explicit Jouled(const testing::FakeDriver& gpus) : JouledProcess(with_access_rule(gpus)) { start(); }
  double limit_w(unsigned gpu) {
    DaemonClient client(socket);
    return client.call({{"op", "state"}})["gpus"][gpu]["power_limit_w"].get<double>();
  }
  // gpu's lock in jouled's state reply for domain ("sm", "memory"): "210-990" or "unlocked".
  std::string clock_lock(unsigned gpu, const std::string& domain) {
    DaemonClient client(socket);
    const auto lock = client.call({{"op", "state"}})["gpus"][gpu]["clocks"][domain]["lock"];
    return lock.is_null() ? "unlocked" : fmt::format("{}-{}", lock["min_mhz"].get<int>(), lock["max_mhz"].get<int>());
  }
  // The lowest core clock: where the tests' locks start.
  unsigned lowest_mhz() const { return driver.core_clocks_mhz.front(); }
};

// Each test runs once per fake driver: the same leases, rules and restores,
// each driver's own set calls.
class JouledTest : public ::testing::TestWithParam<testing::FakeDriver> {};
class JouledClockTest : public ::testing::TestWithParam<testing::FakeDriver> {};

// The lines of several set calls, in order.
std::vector<std::string> calls_of(std::initializer_list<std::vector<std::string>> groups) {
  std::vector<std::string> all;
  for (const auto& group : groups) all.insert(all.end(), group.begin(), group.end());
  return all;
}

// Runs fn in a child process (optionally as "nobody"); returns what it wrote.
struct Child {
  pid_t pid = -1;
  int from_child = -1;
  template <typename Fn>
  static Child start(Fn fn, bool as_nobody = false) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    Child child;
    child.pid = fork();
    if (child.pid == 0) {
      close(fds[0]);
      if (as_nobody && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
      std::string out;
      try {
        out = fn();
      } catch (const std::exception& e) {
        out = std::string("error: ") + e.what();
      }
      (void)!write(fds[1], out.data(), out.size());
      (void)!write(fds[1], "\n", 1);
      fn_wait_forever_if_asked();
      _exit(0);
    }
    close(fds[1]);
    child.from_child = fds[0];
    return child;
  }
  static inline bool wait_forever = false;
  static void fn_wait_forever_if_asked() {
    while (wait_forever) pause();
  }
  std::string read_line() const {
    std::string line;
    char c;
    while (read(from_child, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  int wait() const {
    int status = 0;
    waitpid(pid, &status, 0);
    close(from_child);
    return status;
  }
};

std::string set_limit(const std::string& socket, unsigned gpu, double limit_w) {
  DaemonClient client(socket);
  const auto reply = client.call({{"op", "set_power_limit"}, {"gpu", gpu}, {"limit_w", limit_w}});
  return "ok " + reply["power_limit_w"].dump();
}

// The state reply carries a GPU's power-limit facts under the names `joule
// info --json` and joule.devices() use (add_power_limit_fields), the error
// null when the driver refused none.
TEST_P(JouledTest, StateReportsThePowerLimitFactsUnderTheNamesInfoUses) {
  Jouled jouled(GetParam());
  DaemonClient client(jouled.socket);
  const auto gpu = client.call({{"op", "state"}})["gpus"][0];
  for (const char* fact : {"power_limit_w", "default_limit_w", "min_limit_w", "max_limit_w"}) {
    EXPECT_TRUE(gpu[fact].is_number()) << fact << " in " << gpu.dump();
  }
  EXPECT_LE(gpu["min_limit_w"].get<double>(), gpu["power_limit_w"].get<double>());
  EXPECT_LE(gpu["power_limit_w"].get<double>(), gpu["max_limit_w"].get<double>());
  ASSERT_TRUE(gpu.contains("power_limit_error")) << gpu.dump();
  EXPECT_TRUE(gpu["power_limit_error"].is_null()) << gpu.dump();
  EXPECT_FALSE(gpu.contains("error")) << gpu.dump();
}

TEST_P(JouledTest, ClientKilledWithSigkillHasItsLimitBackWithinOneSecond) {
  Jouled jouled(GetParam());
  Child::wait_forever = true;
  Child child = Child::start([&] {
    // The connection must stay open until the kill: the lease lives with it.
    auto* client = new DaemonClient(jouled.socket);
    const auto reply = client->call({{"op", "set_power_limit"}, {"gpu", 0}, {"limit_w", 150}});
    return "ok " + reply["power_limit_w"].dump();
  });
  Child::wait_forever = false;
  EXPECT_EQ(child.read_line(), "ok 150.0");
  EXPECT_DOUBLE_EQ(jouled.limit_w(0), 150.0);
  const auto killed = std::chrono::steady_clock::now();
  kill(child.pid, SIGKILL);
  child.wait();
  double limit = 0;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(1) && (limit = jouled.limit_w(0)) != 300.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_DOUBLE_EQ(limit, 300.0) << jouled.log();
  EXPECT_NE(jouled.log().find("restore gpu0 150.0 W -> 300.0 W"), std::string::npos) << jouled.log();
  EXPECT_EQ(jouled.set_calls(), calls_of({GetParam().power_limit_log(0, 150), GetParam().power_limit_log(0, 300)}));
}

TEST_P(JouledTest, DaemonKilledAndRestartedRestoresWhatItHadChanged) {
  Jouled jouled(GetParam());
  DaemonClient client(jouled.socket);
  client.call({{"op", "set_power_limit"}, {"gpu", 1}, {"limit_w", 120}});
  kill(jouled.pid, SIGKILL);
  testing::wait_process(jouled.pid);
  // The GPU keeps the changed limit while no daemon runs...
  EXPECT_EQ(jouled.held().at(1).limit_w, 120.0);
  jouled.start();
  // ...and the new instance puts it back from its state file.
  EXPECT_DOUBLE_EQ(jouled.limit_w(1), 300.0);
  EXPECT_EQ(jouled.held().at(1).limit_w, 300.0);
  EXPECT_NE(jouled.log().find("recover: gpu1 120.0 W -> 300.0 W"), std::string::npos) << jouled.log();
}

TEST_P(JouledTest, UnauthorisedUserIsRefusedWithTheReasonAndPerGpuRulesApply) {
  Jouled jouled(GetParam());
  Child denied = Child::start([&] { return set_limit(jouled.socket, 0, 200); }, /*as_nobody=*/true);
  const std::string refusal = denied.read_line();
  denied.wait();
  EXPECT_NE(refusal.find("nobody is not allowed to change gpu0"), std::string::npos) << refusal;
  Child allowed = Child::start([&] { return set_limit(jouled.socket, 1, 200); }, /*as_nobody=*/true);
  EXPECT_EQ(allowed.read_line(), "ok 200.0");
  allowed.wait();
  for (int i = 0; i < 200 && jouled.limit_w(1) != 300.0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(jouled.set_calls(), calls_of({GetParam().power_limit_log(1, 200), GetParam().power_limit_log(1, 300)}));
  EXPECT_NE(jouled.log().find("refused set_power_limit gpu0 from nobody"), std::string::npos);
}

TEST_P(JouledTest, SecondClientIsRefusedWhileTheFirstHoldsTheGpu) {
  Jouled jouled(GetParam());
  DaemonClient first(jouled.socket);
  first.call({{"op", "lease"}, {"gpu", 0}});
  Child second = Child::start([&] { return set_limit(jouled.socket, 0, 250); });
  const std::string refusal = second.read_line();
  second.wait();
  EXPECT_NE(refusal.find("gpu0 is held by root (uid 0, pid"), std::string::npos) << refusal;
  EXPECT_TRUE(jouled.set_calls().empty());
  first.call({{"op", "release"}, {"gpu", 0}});
  Child third = Child::start([&] { return set_limit(jouled.socket, 0, 250); });
  EXPECT_EQ(third.read_line(), "ok 250.0");
  third.wait();
}

TEST_P(JouledTest, ThousandMalformedMessagesLeaveItServingAndTheGpusUntouched) {
  Jouled jouled(GetParam());
  std::mt19937 rng(7);
  const std::vector<std::string> seeds = {
      R"({"v":1,"id":1,"op":"set_power_limit","gpu":0,"limit_w":200})", R"({"v":1,"id":2,"op":"state"})",
      R"({"v":1,"id":3,"op":"lease","gpu":1})"};
  auto connect_raw = [&] {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, jouled.socket.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    return fd;
  };
  int fd = connect_raw();
  int replies = 0, reconnects = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string message = seeds[rng() % seeds.size()];
    switch (i % 5) {
      case 0: message[rng() % message.size()] = static_cast<char>(rng() % 256); break;  // flip a byte
      case 1: message = message.substr(0, rng() % message.size()); break;              // truncate
      case 2: message.replace(message.find("\"v\":1"), 5, "\"v\":" + std::to_string(rng() % 5 + 2)); break;
      case 3: message = "[" + message + "]"; break;
      case 4: message = std::string(5000 + rng() % 1000, 'x'); break;                   // oversized
    }
    const bool unterminated = i % 10 == 4;  // oversized without a newline: the daemon hangs up
    for (char& c : message) {
      if (c == '\n') c = ' ';  // one message per line
    }
    if (message.find("\"limit_w\":200}") != std::string::npos && message.find("set_power_limit") != std::string::npos &&
        message.rfind("{\"v\":1,", 0) == 0) {
      continue;  // a mutation that left a valid request is not malformed
    }
    if (!unterminated) message += "\n";
    if (send(fd, message.data(), message.size(), MSG_NOSIGNAL) <= 0 || unterminated) {
      char buffer[8192];
      while (read(fd, buffer, sizeof buffer) > 0) {
      }
      close(fd);
      fd = connect_raw();  // the daemon closes after an oversized message
      ++reconnects;
      continue;
    }
    char buffer[8192];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) ++replies;
  }
  close(fd);
  EXPECT_GT(replies, 800);
  EXPECT_GE(reconnects, 100);
  EXPECT_TRUE(jouled.set_calls().empty());
  // Still serving, and still changing GPUs for a well-formed request.
  EXPECT_EQ(set_limit(jouled.socket, 0, 210), "ok 210.0");
}

// Issue 47's audit of jouled: a request line holding bytes that are not
// UTF-8 is refused naming the byte (it was "not valid JSON"), and no reply
// or log line carries a client's bytes raw: an op name with a newline would
// have forged a line of jouled's log. The daemon serves on, GPUs untouched.
TEST_P(JouledTest, BytesThatAreNotUtf8AreRefusedNamingTheByteAndNeverEchoedRaw) {
  Jouled jouled(GetParam());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, jouled.socket.c_str());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const auto reply_to = [&](const std::string& line) {
    const std::string message = line + "\n";
    EXPECT_EQ(send(fd, message.data(), message.size(), MSG_NOSIGNAL), static_cast<ssize_t>(message.size()));
    std::string reply;
    char c = 0;
    while (reply.size() < 8192 && read(fd, &c, 1) == 1 && c != '\n') reply += c;
    return reply;
  };
  const std::string invalid[] = {"{\"v\":1,\"id\":1,\"op\":\"st\xff" "ate\"}",
                                 "{\"v\":1,\"id\":2,\"op\":\"set_power_limit\",\"gpu\":0,\"limit_w\":\"\xc0\xaf\"}",
                                 "\xed\xa0\x80"};
  for (const std::string& line : invalid) {
    SCOPED_TRACE(printable(line));
    const std::string reply = reply_to(line);
    ASSERT_TRUE(is_valid_utf8(reply)) << printable(reply);
    const nlohmann::json answer = nlohmann::json::parse(reply);
    EXPECT_EQ(answer["ok"], false);
    EXPECT_EQ(answer["code"], "invalid");
    EXPECT_NE(answer["error"].get<std::string>().find("invalid UTF-8 at byte"), std::string::npos) << reply;
  }
  // Valid UTF-8 with a newline in the op's name (JSON-escaped in the request).
  const std::string forged = reply_to(R"({"v":1,"id":3,"op":"x\nrefused from root: forged"})");
  EXPECT_NE(nlohmann::json::parse(forged)["error"].get<std::string>().find("x\\x0Arefused"), std::string::npos)
      << forged;
  close(fd);
  EXPECT_EQ(set_limit(jouled.socket, 0, 210), "ok 210.0");
  const std::string log = jouled.log();
  EXPECT_TRUE(is_valid_utf8(log)) << printable(log);
  EXPECT_EQ(log.find("\nrefused from root: forged"), std::string::npos) << log;
}

TEST_P(JouledTest, RestoreDefaultAndRestoreAndReleaseFollowTheLease) {
  Jouled jouled(GetParam());
  DaemonClient client(jouled.socket);
  // gpu2 starts at 280 W; its default is 300 W.
  client.call({{"op", "set_power_limit"}, {"gpu", 2}, {"limit_w", 150}});  // the lease remembers 280 W
  EXPECT_DOUBLE_EQ(client.call({{"op", "restore"}, {"gpu", 2}})["power_limit_w"].get<double>(), 280.0);
  EXPECT_DOUBLE_EQ(client.call({{"op", "restore_default"}, {"gpu", 2}})["power_limit_w"].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(client.call({{"op", "release"}, {"gpu", 2}})["power_limit_w"].get<double>(), 280.0);
  EXPECT_THROW(client.call({{"op", "restore"}, {"gpu", 2}}), DeviceError);  // no longer held
}

TEST_P(JouledTest, OutOfRangeLimitsAndUnknownGpusAreRefusedWithoutADriverCall) {
  Jouled jouled(GetParam());
  DaemonClient client(jouled.socket);
  try {
    client.call({{"op", "set_power_limit"}, {"gpu", 0}, {"limit_w", 500}});
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("500.0 W is outside gpu0's range 100.0 W-300.0 W"), std::string::npos) << e.what();
  }
  EXPECT_THROW(client.call({{"op", "set_power_limit"}, {"gpu", 9}, {"limit_w", 200}}), DeviceError);
  EXPECT_TRUE(jouled.set_calls().empty());
}

TEST_P(JouledTest, TheLibraryGoesThroughTheDaemonAndLeasesEndWithTheProcess) {
  Jouled jouled(GetParam());
  {
    DiscoveryOptions options;
    GetParam().point_discovery(options, jouled.fake);
    options.control = "daemon";  // as a non-root process would by default
    options.daemon_socket = jouled.socket;
    const Devices devices = discover_devices(options);
    EXPECT_EQ(devices.control_path, "jouled at " + jouled.socket + " (requested)");
    devices.gpus[0]->set_power_limit_mw(180'000);
    EXPECT_DOUBLE_EQ(jouled.limit_w(0), 180.0);
    EXPECT_TRUE(devices.gpus[0]->running_processes().empty());  // readings pass through the wrapper
  }  // the connection closes with the devices
  for (int i = 0; i < 200 && jouled.limit_w(0) != 300.0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_DOUBLE_EQ(jouled.limit_w(0), 300.0);
  auto env = GetParam().env(jouled.fake);
  env["JOULE_CONTROL"] = "daemon";
  env["JOULE_DAEMON_SOCKET"] = jouled.socket;
  const auto r = testing::run_process({JOULE_BINARY, "info"}, env);
  EXPECT_NE(r.out.find("Power-limit control: jouled at " + jouled.socket), std::string::npos) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, JouledTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

TEST(JouledConfigTest, CheckConfigValidatesAndNamesProblems) {
  TempDir tmp;
  testing::write_file(tmp.file("good.conf"), R"({"socket": "/tmp/x.sock", "allow": [{"group": "root", "gpus": "all"}]})");
  const auto good = testing::run_process({JOULED_BINARY, "--check-config", "--config", tmp.file("good.conf")});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("allow group root: all GPUs"), std::string::npos) << good.out;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"sockett": "/x"})", "unknown key \"sockett\""},
      {R"({"allow": [{"user": "no-such-user-here"}]})", "no such user \"no-such-user-here\""},
      {R"({"allow": [{"user": "root", "group": "root"}]})", "needs exactly one of"},
      {R"({"socket_mode": "999"})", "octal"},
      {"{", "not valid JSON"},
  };
  for (const auto& [text, message] : bad) {
    testing::write_file(tmp.file("bad.conf"), text);
    const auto r = testing::run_process({JOULED_BINARY, "--check-config", "--config", tmp.file("bad.conf")});
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_NE(r.err.find(message), std::string::npos) << text << "\n" << r.err;
  }
}

// jouled's `auto` is the driver's GPUs, as `nvml` (the default) is: with no
// usable NVML it does not start, says why and never listens, rather than
// controlling simulated GPUs or none. --backend sim still starts.
// (JouledAmdTest.WithNeitherLibraryItNamesBothAndDoesNotStart: the same with --backend rocm.)
TEST(JouledConfigTest, WithoutAUsableDriverItDoesNotStartAndSaysWhy) {
  TempDir tmp;
  const std::string socket = tmp.file("jouled.sock");
  testing::write_file(tmp.file("jouled.conf"),
                      R"({"socket": ")" + socket + R"(", "state_file": ")" + tmp.file("jouled.state") + R"("})");
  const std::map<std::string, std::string> no_driver = {{"JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
                                                        {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"},
                                                        {"JOULE_SIM", "count=2"}};
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--backend", "auto"}, {"--backend", "nvml"}, {}}) {
    SCOPED_TRACE(::testing::PrintToString(flags));
    std::vector<std::string> args = {JOULED_BINARY, "--config", tmp.file("jouled.conf")};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = testing::run_process(args, no_driver, 10.0);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("not starting"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--backend sim"), std::string::npos) << r.err;
    EXPECT_NE(access(socket.c_str(), F_OK), 0) << "it listened";
  }
  const pid_t sim = testing::start_process({JOULED_BINARY, "--config", tmp.file("jouled.conf"), "--backend", "sim"},
                                           no_driver, tmp.file("sim.out"), tmp.file("sim.err"));
  for (int i = 0; i < 500 && access(socket.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(access(socket.c_str(), F_OK), 0) << testing::read_file(tmp.file("sim.err"));
  kill(sim, SIGTERM);
  EXPECT_EQ(testing::wait_process(sim, 10.0), 0) << testing::read_file(tmp.file("sim.err"));
  EXPECT_NE(testing::read_file(tmp.file("sim.err")).find("SIMULATED"), std::string::npos);
}

// Clock locks are leases like power limits: granted under the same rules,
// recorded before they change anything, and undone when the connection ends
// (SIGKILL included) or, after jouled itself was killed, on its next start.
TEST_P(JouledClockTest, ClientKilledWithSigkillHasItsClockLocksUndoneWithinOneSecond) {
  const testing::FakeDriver& driver = GetParam();
  Jouled jouled(driver);
  const unsigned lowest = jouled.lowest_mhz();
  Child::wait_forever = true;
  Child child = Child::start([&] {
    auto* client = new DaemonClient(jouled.socket);  // open until the kill
    client->call({{"op", "lock_clock"}, {"gpu", 0}, {"domain", "sm"}, {"min_mhz", lowest}, {"max_mhz", 990}});
    const auto reply =
        client->call({{"op", "lock_clock"}, {"gpu", 0}, {"domain", "memory"}, {"min_mhz", 405}, {"max_mhz", 405}});
    return "ok " + reply["lock"].dump() + " " + reply["restore_lock"].dump();
  });
  Child::wait_forever = false;
  EXPECT_EQ(child.read_line(), R"(ok {"max_mhz":405,"min_mhz":405} null)");
  EXPECT_EQ(jouled.clock_lock(0, "sm"), fmt::format("{}-990", lowest));
  const auto killed = std::chrono::steady_clock::now();
  kill(child.pid, SIGKILL);
  child.wait();
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(1) && jouled.clock_lock(0, "sm") != "unlocked") {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(jouled.clock_lock(0, "sm"), "unlocked") << jouled.log();
  EXPECT_EQ(jouled.clock_lock(0, "memory"), "unlocked") << jouled.log();
  if (driver.backend == GpuBackend::kNvml) {
    EXPECT_EQ(jouled.set_calls(), (std::vector<std::string>{
                                      "nvmlDeviceSetGpuLockedClocks device=0 min_mhz=210 max_mhz=990",
                                      "nvmlDeviceSetMemoryLockedClocks device=0 min_mhz=405 max_mhz=405",
                                      "nvmlDeviceResetGpuLockedClocks device=0",
                                      "nvmlDeviceResetMemoryLockedClocks device=0"}));
  } else {
    // ROCm SMI has one perf level for both clocks: undoing the core lock
    // (auto) drops the memory one too, so it is set again, then undone.
    const std::string memory_lock = "rsmi_dev_gpu_clk_freq_set device=0 clk=mem mask=0x1";
    EXPECT_EQ(jouled.set_calls(), calls_of({driver.clock_lock_log(0, 990),
                                            {"rsmi_dev_perf_level_set device=0 level=manual", memory_lock},
                                            driver.clock_reset_log(0),
                                            {"rsmi_dev_perf_level_set device=0 level=manual", memory_lock},
                                            driver.clock_reset_log(0)}));
  }
  EXPECT_FALSE(jouled.held().at(0).clocks_held);
  // The audit log names who, which GPU, the old and new lock.
  const std::string log = jouled.log();
  EXPECT_NE(log.find(fmt::format("set gpu0 sm clock unlocked -> {}-990 MHz for root (uid 0, pid", lowest)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(fmt::format("restore gpu0 300.0 W -> 300.0 W, sm clock {}-990 MHz -> unlocked, memory clock "
                                 "405-405 MHz -> unlocked: root (uid 0, pid",
                                 lowest)),
            std::string::npos)
      << log;
}

TEST_P(JouledClockTest, DaemonKilledAndRestartedUndoesTheLocksItHadApplied) {
  Jouled jouled(GetParam());
  DaemonClient client(jouled.socket);
  client.call({{"op", "set_power_limit"}, {"gpu", 1}, {"limit_w", 150}});
  client.call({{"op", "lock_clock"}, {"gpu", 1}, {"domain", "sm"}, {"min_mhz", jouled.lowest_mhz()}, {"max_mhz", 1200}});
  kill(jouled.pid, SIGKILL);
  testing::wait_process(jouled.pid);
  // The GPU keeps the limit and the lock while no daemon runs...
  EXPECT_EQ(jouled.held().at(1).limit_w, 150.0);
  EXPECT_TRUE(jouled.held().at(1).clocks_held);
  jouled.start();
  // ...and the new instance undoes them from its state file, though the driver cannot say which lock it holds.
  EXPECT_EQ(jouled.held().at(1).limit_w, 300.0);
  EXPECT_FALSE(jouled.held().at(1).clocks_held);
  EXPECT_EQ(jouled.clock_lock(1, "sm"), "unlocked");
  EXPECT_NE(jouled.log().find("recover: gpu1 150.0 W -> 300.0 W, sm clock unknown -> unlocked"),
            std::string::npos)
      << jouled.log();
}

TEST_P(JouledClockTest, LocksFollowTheRulesAndBadLocksAreRefusedWithoutADriverCall) {
  Jouled jouled(GetParam());
  const int lowest = static_cast<int>(jouled.lowest_mhz());
  auto lock = [&](unsigned gpu, const char* domain, int min_mhz, int max_mhz) {
    DaemonClient client(jouled.socket);
    const auto reply =
        client.call({{"op", "lock_clock"}, {"gpu", gpu}, {"domain", domain}, {"min_mhz", min_mhz}, {"max_mhz", max_mhz}});
    return "ok " + reply["lock"].dump();
  };
  Child denied = Child::start([&] { return lock(0, "sm", lowest, 990); }, /*as_nobody=*/true);
  EXPECT_NE(denied.read_line().find("nobody is not allowed to change gpu0"), std::string::npos);
  denied.wait();
  const std::vector<std::tuple<const char*, int, int, std::string>> bad = {
      {"sm", lowest, 2500, "outside"}, {"sm", 990, lowest, "is empty"}, {"memory", 405, 8000, "outside"}};
  for (const auto& [domain, min_mhz, max_mhz, message] : bad) {
    try {
      lock(0, domain, min_mhz, max_mhz);
      ADD_FAILURE() << domain << " " << min_mhz << "-" << max_mhz << " accepted";
    } catch (const DeviceError& e) {
      EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  DaemonClient raw(jouled.socket);
  EXPECT_THROW(raw.call({{"op", "lock_clock"}, {"gpu", 0}, {"domain", "shader"}, {"min_mhz", lowest}, {"max_mhz", 990}}),
               DeviceError);
  EXPECT_THROW(raw.call({{"op", "lock_clock"}, {"gpu", 0}, {"domain", "sm"}, {"max_mhz", 990}}), DeviceError);
  EXPECT_TRUE(jouled.set_calls().empty());
  // A holder's clock is as much its own as its limit.
  raw.call({{"op", "lease"}, {"gpu", 0}});
  Child busy = Child::start([&] { return lock(0, "sm", lowest, 990); });
  EXPECT_NE(busy.read_line().find("gpu0 is held by root"), std::string::npos);
  busy.wait();
  // The one rule that lets nobody change gpu1 covers its clocks too.
  Child allowed = Child::start([&] { return lock(1, "sm", lowest, 990); }, /*as_nobody=*/true);
  EXPECT_EQ(allowed.read_line(), fmt::format(R"(ok {{"max_mhz":990,"min_mhz":{}}})", lowest));
  allowed.wait();
  const std::vector<std::string> lock_calls = GetParam().clock_lock_log(1, 990);
  const std::vector<std::string> calls = jouled.set_calls();  // then, maybe, the reset as the child's lease ends
  ASSERT_GE(calls.size(), lock_calls.size());
  EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + static_cast<long>(lock_calls.size())), lock_calls);
}

TEST_P(JouledClockTest, ResetRestoreAndReleaseFollowTheLease) {
  const testing::FakeDriver& driver = GetParam();
  Jouled jouled(driver);
  DaemonClient client(jouled.socket);
  auto lock_sm = [&](int max_mhz) {
    return client.call(
        {{"op", "lock_clock"}, {"gpu", 2}, {"domain", "sm"}, {"min_mhz", jouled.lowest_mhz()}, {"max_mhz", max_mhz}});
  };
  EXPECT_EQ(lock_sm(1500)["restore_lock"], nullptr);  // the lease found the clock unlocked
  EXPECT_EQ(client.call({{"op", "reset_clock"}, {"gpu", 2}, {"domain", "sm"}})["lock"], nullptr);
  EXPECT_EQ(jouled.clock_lock(2, "sm"), "unlocked");
  lock_sm(900);
  client.call({{"op", "restore"}, {"gpu", 2}});
  EXPECT_EQ(jouled.clock_lock(2, "sm"), "unlocked");  // what the lease found...
  Child other = Child::start([&] { return DaemonClient(jouled.socket).call({{"op", "lease"}, {"gpu", 2}}).dump(); });
  EXPECT_NE(other.read_line().find("gpu2 is held by root"), std::string::npos);  // ...and still held
  other.wait();
  lock_sm(1200);
  client.call({{"op", "release"}, {"gpu", 2}});
  EXPECT_EQ(jouled.clock_lock(2, "sm"), "unlocked");
  EXPECT_EQ(jouled.set_calls(),
            calls_of({driver.clock_lock_log(2, 1500), driver.clock_reset_log(2), driver.clock_lock_log(2, 900),
                      driver.clock_reset_log(2), driver.clock_lock_log(2, 1200), driver.clock_reset_log(2)}));
}

TEST_P(JouledClockTest, TheLibraryAndASweepLockClocksThroughTheDaemon) {
  const testing::FakeDriver& driver = GetParam();
  Jouled jouled(driver);
  const unsigned lowest = jouled.lowest_mhz();
  {
    DiscoveryOptions options;
    driver.point_discovery(options, jouled.fake);
    options.control = "daemon";
    options.daemon_socket = jouled.socket;
    const Devices devices = discover_devices(options);
    Gpu& gpu = *devices.gpus[0];
    EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), std::nullopt);
    gpu.lock_clock_mhz(ClockDomain::kSm, clock_cap_lock(gpu, ClockDomain::kSm, 1005));
    EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), (ClockLock{lowest, 1005}));  // read back from jouled
    EXPECT_EQ(jouled.clock_lock(0, "sm"), fmt::format("{}-1005", lowest));
    EXPECT_THROW(gpu.lock_clock_mhz(ClockDomain::kSm, {lowest, 2000}), DeviceError);  // refused before asking jouled
  }  // the connection closes with the devices: jouled undoes the lock
  for (int i = 0; i < 200 && jouled.clock_lock(0, "sm") != "unlocked"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(jouled.clock_lock(0, "sm"), "unlocked");

  // A sweep over SM clock caps, as a user without root runs it: every run's
  // lock goes through jouled and is reset after the run.
  testing::write_file(jouled.dir.file("s.toml"), "command = \"true\"\nstore = \"" + jouled.dir.file("s.sqlite") +
                                                     "\"\n[grid]\ngpus = [2]\nsm_clock_mhz = [1980, 990]\n");
  SweepOptions options;
  options.log = [](const std::string&) {};
  driver.point_discovery(options.discovery, jouled.fake);
  options.discovery.powercap_root = "/nonexistent";
  options.discovery.control = "daemon";
  options.discovery.daemon_socket = jouled.socket;
  const std::size_t calls_before = jouled.set_calls().size();
  const SweepSummary summary = run_sweep(SweepConfig::load(jouled.dir.file("s.toml")), options);
  EXPECT_EQ(summary.ran, 2);
  EXPECT_EQ(summary.failed, 0);
  const auto calls = jouled.set_calls();
  const std::vector<std::string> sweep_calls(calls.begin() + static_cast<long>(calls_before), calls.end());
  std::vector<std::string> expected;
  for (unsigned cap : {1980, 990}) {
    for (int d = 0; d < 2; ++d) expected = calls_of({expected, driver.clock_lock_log(d, cap)});
    for (int d = 1; d >= 0; --d) expected = calls_of({expected, driver.clock_reset_log(d)});
  }
  EXPECT_EQ(sweep_calls, expected);
  EXPECT_NE(jouled.log().find(fmt::format("set gpu1 sm clock unlocked -> {}-990 MHz", lowest)), std::string::npos)
      << jouled.log();
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, JouledClockTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

}  // namespace
}  // namespace joule

namespace joule {
namespace {

// A server that accepts and never answers: the client's call fails with the
// reason within its timeout instead of hanging its caller.
TEST(DaemonClientTest, ASilentDaemonIsAnErrorWithinTheTimeoutNotAHang) {
  testing::TempDir tmp;
  const std::string path = tmp.file("silent.sock");
  const int server = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(server, 1), 0);
  daemon::DaemonClient client(path, 0.3);
  const auto start = std::chrono::steady_clock::now();
  try {
    client.call({{"op", "status"}});
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer within 0.3 s"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  close(server);
}

}  // namespace
}  // namespace joule

namespace joule {
namespace {

// jouled on AMD GPUs (the fake ROCm SMI), alone or beside NVIDIA ones: the
// same leases, restored through the same Gpu interface, with ROCm SMI's calls.
// (JouledTest and JouledClockTest above run every lease on the fake ROCm
// SMI's GPUs alone; these add an MI300X pair's caps and a mixed node.)
constexpr const char* kFakeMi300x =
    "device name=\"AMD Instinct MI300X\" min_limit_w=200 max_limit_w=750 limit_w=750 default_limit_w=750 "
    "sys_clocks_mhz=500,1300,2100 mem_clocks_mhz=900,1300";

struct AmdJouled : testing::JouledProcess {
  explicit AmdJouled(bool with_nvidia) : JouledProcess(options(with_nvidia)) { start(); }
  static testing::JouledOptions options(bool with_nvidia) {
    testing::JouledOptions options;
    options.three_gpus = with_nvidia;
    options.rocm_config = std::string(kFakeMi300x) + "\n" + kFakeMi300x + "\n";
    return options;
  }
  double limit_w(unsigned gpu) {
    return DaemonClient(socket).call({{"op", "state"}})["gpus"][gpu]["power_limit_w"].get<double>();
  }
  std::vector<std::string> amd_set_calls() const {
    return std::filesystem::exists(rocm_fake.log_path) ? testing::read_lines(rocm_fake.log_path)
                                                       : std::vector<std::string>{};
  }
};

// Waits up to a second for gpu's limit to come back to want_w.
double limit_after_restore(AmdJouled& jouled, unsigned gpu, double want_w) {
  const auto start = std::chrono::steady_clock::now();
  double limit = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(1) &&
         (limit = jouled.limit_w(gpu)) != want_w) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return limit;
}

TEST(JouledAmdTest, OnAnAmdNodeAPowerCapLeaseReachesRocmSmiAndEndsWithTheClient) {
  AmdJouled jouled(/*with_nvidia=*/false);
  EXPECT_NE(jouled.log().find("GPUs: 2 (ROCm SMI"), std::string::npos) << jouled.log();
  ASSERT_EQ(jouled.gpus().size(), 2u);
  EXPECT_EQ(jouled.gpus()[1]["name"], "AMD Instinct MI300X");
  Child::wait_forever = true;
  Child child = Child::start([&] {
    auto* client = new DaemonClient(jouled.socket);  // open until the kill: the lease lives with it
    return "ok " + client->call({{"op", "set_power_limit"}, {"gpu", 1}, {"limit_w", 500}})["power_limit_w"].dump();
  });
  Child::wait_forever = false;
  EXPECT_EQ(child.read_line(), "ok 500.0");
  EXPECT_DOUBLE_EQ(jouled.limit_w(1), 500.0);
  EXPECT_EQ(jouled.amd_set_calls(),
            (std::vector<std::string>{"rsmi_dev_power_cap_set device=1 sensor=0 cap_uw=500000000"}));
  kill(child.pid, SIGKILL);
  child.wait();
  EXPECT_DOUBLE_EQ(limit_after_restore(jouled, 1, 750.0), 750.0) << jouled.log();
  EXPECT_EQ(jouled.amd_set_calls().back(), "rsmi_dev_power_cap_set device=1 sensor=0 cap_uw=750000000");
  EXPECT_NE(jouled.log().find("restore gpu1 500.0 W -> 750.0 W"), std::string::npos) << jouled.log();
  EXPECT_DOUBLE_EQ(jouled.limit_w(0), 750.0);  // the other GPU never touched
}

TEST(JouledAmdTest, OnAnAmdNodeALeaseEndsWhenReleasedAndClockLocksAreUndone) {
  AmdJouled jouled(/*with_nvidia=*/false);
  {
    DaemonClient client(jouled.socket);
    client.call({{"op", "set_power_limit"}, {"gpu", 0}, {"limit_w", 300}});
    client.call({{"op", "lock_clock"}, {"gpu", 0}, {"domain", "sm"}, {"min_mhz", 500}, {"max_mhz", 1300}});
    EXPECT_DOUBLE_EQ(client.call({{"op", "release"}, {"gpu", 0}})["power_limit_w"].get<double>(), 750.0);
  }
  EXPECT_EQ(jouled.amd_set_calls(), (std::vector<std::string>{
                                        "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=300000000",
                                        "rsmi_dev_perf_level_set device=0 level=manual",
                                        "rsmi_dev_gpu_clk_freq_set device=0 clk=sys mask=0x3",
                                        "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=750000000",
                                        "rsmi_dev_perf_level_set device=0 level=auto"}))
      << jouled.log();
}

// (A restart on an AMD node: JouledTest.DaemonKilledAndRestartedRestoresWhatItHadChanged/rocm.)

// A mixed node: the NVIDIA GPUs first (gpu0-2), then the AMD GPUs (gpu3, gpu4); a
// lease on gpu4 is ROCm SMI's device 1 and leaves NVML alone.
TEST(JouledAmdTest, OnAMixedNodeEachGpuIsControlledThroughItsOwnLibrary) {
  AmdJouled jouled(/*with_nvidia=*/true);
  const auto gpus = jouled.gpus();
  ASSERT_EQ(gpus.size(), 5u) << jouled.log();
  EXPECT_EQ(gpus[0]["name"], testing::fake_nvml_driver().gpu_name);
  EXPECT_EQ(gpus[4]["name"], "AMD Instinct MI300X");
  {
    DaemonClient client(jouled.socket);
    client.call({{"op", "set_power_limit"}, {"gpu", 4}, {"limit_w", 450}});
    client.call({{"op", "set_power_limit"}, {"gpu", 0}, {"limit_w", 200}});
    EXPECT_DOUBLE_EQ(jouled.limit_w(4), 450.0);
  }  // the connection ends: both leases restored
  EXPECT_DOUBLE_EQ(limit_after_restore(jouled, 4, 750.0), 750.0) << jouled.log();
  EXPECT_DOUBLE_EQ(limit_after_restore(jouled, 0, 300.0), 300.0) << jouled.log();
  EXPECT_EQ(jouled.amd_set_calls(), (std::vector<std::string>{
                                        "rsmi_dev_power_cap_set device=1 sensor=0 cap_uw=450000000",
                                        "rsmi_dev_power_cap_set device=1 sensor=0 cap_uw=750000000"}));
  const auto nvidia_calls = testing::read_lines(jouled.fake.log_path);
  ASSERT_FALSE(nvidia_calls.empty());
  for (const auto& call : nvidia_calls) EXPECT_NE(call.find("device=0"), std::string::npos) << call;
}

// Neither library usable: jouled names both and does not start.
TEST(JouledAmdTest, WithNeitherLibraryItNamesBothAndDoesNotStart) {
  TempDir tmp;
  testing::write_file(tmp.file("jouled.conf"), R"({"socket": ")" + tmp.file("jouled.sock") + R"(", "state_file": ")" +
                                                   tmp.file("jouled.state") + R"("})");
  const std::map<std::string, std::string> nothing = {{"JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
                                                      {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"}};
  for (const std::string backend : {"auto", "rocm"}) {
    const auto r = testing::run_process({JOULED_BINARY, "--config", tmp.file("jouled.conf"), "--backend", backend},
                                        nothing, 10.0);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("not starting"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/nonexistent/librocm_smi64.so.1"), std::string::npos) << r.err;
    if (backend == "auto") {
      EXPECT_NE(r.err.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << r.err;
    }
  }
}

}  // namespace
}  // namespace joule
