// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule top` end to end: the real binary in a real (tmux) terminal of 80x24,
// driven with keys; and with stdout to a file, where it prints plain lines.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/top_view.h"
#include "common/fake_drivers.h"
#include "common/jouled_process.h"
#include "common/test_support.h"
#include "joule/daemon/client.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

const std::map<std::string, std::string>& kSimEnv = testing::simulated_only_env();

bool have_tmux() { return run_process({"sh", "-c", "command -v tmux"}).exit_code == 0; }

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A detached tmux session on a private server, running one shell command in
// a pane of the given size. The server is killed at scope exit.
class TmuxSession {
 public:
  TmuxSession(const std::string& command, int width_cols, int height_rows)
      : socket_(fmt_socket_name()) {
    const auto r = tmux({"new-session", "-d", "-s", "top", "-x", std::to_string(width_cols), "-y",
                         std::to_string(height_rows), command});
    if (r.exit_code != 0) throw std::runtime_error("tmux new-session failed: " + r.err);
  }
  ~TmuxSession() { tmux({"kill-server"}); }
  TmuxSession(const TmuxSession&) = delete;
  TmuxSession& operator=(const TmuxSession&) = delete;

  std::string capture() { return tmux({"capture-pane", "-p", "-t", "top"}).out; }
  void send_keys(const std::string& keys) { tmux({"send-keys", "-t", "top", "-l", keys}); }
  // A tmux format of the pane, e.g. "#{alternate_on}".
  std::string pane(const std::string& format) {
    std::string out = tmux({"display-message", "-p", "-t", "top", format}).out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // Captures until done(screen) holds or timeout_s passes; returns the last capture.
  std::string wait_for(const std::function<bool(const std::string&)>& done, double timeout_s = 10.0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::string screen = capture();
    while (!done(screen) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      screen = capture();
    }
    return screen;
  }

 private:
  static std::string fmt_socket_name() {
    static std::atomic<int> counter{0};
    return "joule-top-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  }
  testing::RunResult tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {"tmux", "-L", socket_, "-f", "/dev/null"});
    return run_process(args, {}, 20.0);
  }

  std::string socket_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// gpu0's energy on screen, and its unit; nullopt when not shown yet.
std::optional<std::pair<double, std::string>> gpu0_energy(const std::string& screen) {
  static const std::regex energy(R"(gpu0 [^\n]*\n[^\n]*?([0-9]+\.[0-9]+) (J|kJ|Wh) +util)");
  std::smatch m;
  if (!std::regex_search(screen, m, energy)) return std::nullopt;
  return std::make_pair(std::stod(m[1]), m[2].str());
}

std::string gpu0_unit(const std::string& screen) {
  const auto energy = gpu0_energy(screen);
  return energy ? energy->second : "";
}
double gpu0_value(const std::string& screen) {
  const auto energy = gpu0_energy(screen);
  return energy ? energy->first : std::nan("");
}

// The command a pane runs: joule top, then what shows the terminal was
// restored (the exit status, stty's mode), then a pause to look at it.
std::string pane_command(const std::vector<std::string>& joule_args, const std::map<std::string, std::string>& env) {
  std::string command = "env";  // unsets (-u) before assignments, as env wants them
  for (const auto& [key, value] : env) command += value.empty() ? " -u " + key : "";
  for (const auto& [key, value] : env) command += value.empty() ? "" : " " + shell_quote(key + "=" + value);
  command += " " + shell_quote(JOULE_BINARY) + " top";
  for (const auto& arg : joule_args) command += " " + shell_quote(arg);
  return command + "; echo \"joule exited with status $?\"; stty -a; sleep 60";
}

// Drives the view: header and rows, fits 80x24, 'u' changes units, 'r'
// resets energy, 'q' quits and leaves a cooked terminal on the main screen.
void drive_top_in_tmux(const std::string& command, const std::vector<std::string>& expected_on_screen) {
  TmuxSession tmux(command, 80, 24);
  std::string screen = tmux.wait_for([](const std::string& s) { return gpu0_energy(s) && contains(s, "gpu1 "); });
  ASSERT_TRUE(contains(screen, "joule top")) << screen;
  for (const auto& expected : expected_on_screen) EXPECT_TRUE(contains(screen, expected)) << expected << "\n" << screen;
  EXPECT_EQ(tmux.pane("#{alternate_on}"), "1");
  const auto lines = lines_of(screen);
  EXPECT_LE(lines.size(), 24u);
  for (const auto& line : lines) EXPECT_LE(cli::display_width(line), 80) << line;
  EXPECT_EQ(gpu0_unit(screen), "J") << screen;

  tmux.send_keys("u");
  screen = tmux.wait_for([](const std::string& s) { return contains(s, "[kJ]") && gpu0_unit(s) == "kJ"; });
  ASSERT_EQ(gpu0_unit(screen), "kJ") << screen;
  EXPECT_TRUE(contains(screen, "[kJ]")) << screen;

  // Enough energy that a reset is unmistakable, then reset.
  screen = tmux.wait_for([](const std::string& s) { return gpu0_value(s) >= 0.3; });
  const double before_kj = gpu0_value(screen);
  ASSERT_GE(before_kj, 0.3) << screen;
  tmux.send_keys("r");
  screen = tmux.wait_for([&](const std::string& s) { return gpu0_value(s) < before_kj / 2; }, 5.0);
  const double after_kj = gpu0_value(screen);
  EXPECT_LT(after_kj, before_kj / 2) << screen;
  EXPECT_LT(after_kj, 0.25) << screen;  // a fraction of a second of power since the reset
  EXPECT_TRUE(std::regex_search(screen, std::regex("since reset 0:00:0[01]"))) << screen;

  tmux.send_keys("q");
  // Until stty has printed its mode too (it runs after joule exits).
  screen = tmux.wait_for([](const std::string& s) { return contains(s, "joule exited with status") && contains(s, "icanon"); });
  EXPECT_TRUE(contains(screen, "joule exited with status 0")) << screen;
  EXPECT_EQ(tmux.pane("#{alternate_on}"), "0") << screen;
  EXPECT_EQ(tmux.pane("#{cursor_flag}"), "1") << screen;
  // stty -a lists "icanon" and "echo" for a cooked terminal, "-icanon" and "-echo" for a raw one.
  EXPECT_TRUE(std::regex_search(screen, std::regex(R"((^|\s)icanon(\s|$))"))) << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex(R"((^|\s)echo(\s|$))"))) << screen;
  EXPECT_FALSE(contains(screen, "joule top  ")) << "the view was left on the main screen\n" << screen;
}

TEST(TopCliTest, DrivenInTmuxOnSimulatedGpus) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  auto env = kSimEnv;
  env["LANG"] = "C.UTF-8";
  env["LC_ALL"] = "";
  drive_top_in_tmux(pane_command({"--sim", "count=2,load=0.6", "--interval-ms", "200"}, env),
                    {"2 GPUs [SIMULATED]", "gpu0 Simulated GPU", "gpu1 Simulated GPU", "418.0 W", "limit 700 W",
                     "held by -", "RAPL: ", "jouled: not reachable",
                     // UTF-8 locale: block sparklines (418 of 700 W is five eighths).
                     "▅"});
}

class TopOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(TopOnFakeDriverTest, DrivenInTmuxWithRaplInAnAsciiLocale) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  const testing::FakeDriver& driver = GetParam();
  TempDir tmp;
  // The current core clock: NVML's sm_mhz, ROCm SMI's level (sys_mhz among
  // sys_clocks_mhz); each fake ignores the other's keys.
  const auto fake = driver.use(
      tmp,
      "device power_w=300 limit_w=650 max_limit_w=700 util_gpu=80 temp_c=61 sm_mhz=1755 "
      "sys_clocks_mhz=500,1200,1755,2100 sys_mhz=1755\n"
      "device power_w=150 limit_w=700 max_limit_w=700 util_gpu=20 temp_c=44 sm_mhz=1200 "
      "sys_clocks_mhz=500,1200,1755,2100 sys_mhz=1200\n");
  const std::string powercap = tmp.file("powercap");
  testing::write_file(powercap + "/intel-rapl:0/name", "package-0\n");
  testing::write_file(powercap + "/intel-rapl:0/energy_uj", "1000\n");
  testing::write_file(powercap + "/intel-rapl:0/max_energy_range_uj", "262143328850\n");
  auto env = driver.env(fake);
  env["JOULE_POWERCAP_ROOT"] = powercap;
  env["LANG"] = "C";
  env["LC_ALL"] = "";
  drive_top_in_tmux(pane_command({"--interval-ms", "200"}, env),
                    {"2 GPUs (" + driver.name + ")", "gpu0 " + driver.gpu_name, "limit 650 W",
                     "gpu1 " + driver.gpu_name, "limit 700 W", "80%", "1755 MHz", "61 C", "44 C", "cpu0 package-0"});
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, TopOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

TEST(TopCliTest, AsciiLocaleGetsNoMultibyteCharacters) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  auto env = kSimEnv;
  env["LANG"] = "C";
  env["LC_ALL"] = "";
  TmuxSession tmux(pane_command({"--sim", "count=2,load=0.6", "--interval-ms", "100"}, env), 80, 24);
  // Several refreshes, so the sparkline has bars.
  const std::string screen =
      tmux.wait_for([](const std::string& s) { return contains(s, "+++++"); });
  EXPECT_TRUE(contains(screen, "+++++")) << screen;  // 418 of 700 W: level 5 of " .:-=+*#@"
  for (unsigned char c : screen) ASSERT_LT(c, 0x80) << screen;
  tmux.send_keys("q");
}

TEST(TopCliTest, PipedStdoutGetsPlainLinesPerRefresh) {
  const auto r = run_process({JOULE_BINARY, "top", "--sim", "count=2,load=0.6", "--interval-ms", "100",
                              "--iterations", "3", "--unit", "wh"},
                             kSimEnv, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  // Plain lines carry no header: that the GPUs are made up is said on stderr.
  EXPECT_TRUE(contains(r.err, "joule top: GPUs are SIMULATED")) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;  // 2 GPUs x 3 refreshes
  const std::regex row(R"(t=([0-9.]+)s gpu([01]) power_w=([0-9.]+) energy_wh=([0-9.]+) limit_w=700\.0 holder="-" .*)");
  double previous_wh = -1.0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, row)) << lines[i];
    EXPECT_EQ(std::stoi(m[2]), static_cast<int>(i % 2)) << lines[i];
    EXPECT_NEAR(std::stod(m[3]), 418.0, 4.2) << lines[i];
    const double seconds = std::stod(m[1]), energy_wh = std::stod(m[4]);
    EXPECT_NEAR(energy_wh, 418.0 * seconds / 3600.0, 0.002) << lines[i];
    if (i % 2 == 0) {
      EXPECT_GT(energy_wh, previous_wh) << lines[i];
      previous_wh = energy_wh;
    }
  }
}

// jouled over each fake driver's GPUs: top asks it who holds which GPU.
TEST_P(TopOnFakeDriverTest, NamesTheJouledLeaseHolderOfEachGpu) {
  const testing::FakeDriver& driver = GetParam();
  testing::JouledOptions options;
  options.driver = &driver;
  options.config_extra = R"("allow": [{"user": "root", "gpus": "all"}])";
  testing::JouledProcess jouled(options);
  jouled.start();
  daemon::DaemonClient holder(jouled.socket);
  try {
    holder.call({{"op", "lease"}, {"gpu", 1}});
  } catch (const std::exception& e) {
    GTEST_SKIP() << "jouled refused a lease to this user: " << e.what();
  }

  auto env = driver.env(jouled.fake);
  env["JOULE_DAEMON_SOCKET"] = jouled.socket;
  env["JOULE_CONTROL"] = "direct";  // top only reads; it asks jouled who holds what
  const auto r = run_process({JOULE_BINARY, "top", "--once", "--interval-ms", "50"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(contains(lines[0], "holder=\"-\"")) << lines[0];
  EXPECT_TRUE(std::regex_search(lines[1], std::regex("holder=\"[^\"]*pid " + std::to_string(getpid()) + "\\)\""))) << lines[1];
  EXPECT_TRUE(contains(lines[2], "holder=\"-\"")) << lines[2];
}

// Issue 34: who uses each GPU, from the driver's running processes (the
// fakes' scripted ones; this test process stands in for a training job):
// plain lines list them, a GPU whose driver cannot list them says so, and the
// `p` key toggles the per-process table in the full-screen view.
std::string fake_nvml_with_processes(const TempDir& tmp, std::map<std::string, std::string>& env) {
  const std::string pid = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(
      tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300 mem_used_mib=1536\n"
           "device name=\"NVIDIA H100 80GB HBM3\" power_w=150\n"
           "process device=0 pid=" + pid + " used_mib=1024 kind=compute\n"
           "error function=nvmlDeviceGetComputeRunningProcesses_v3 device=1 code=3\n");
  env = kSimEnv;
  env["JOULE_NVML_LIBRARY"] = fake.library_path;
  env["JOULE_FAKE_NVML_CONFIG"] = fake.config_path;
  env["JOULE_FAKE_NVML_LOG"] = fake.log_path;
  return pid;
}

// On each driver: plain lines list each GPU's processes, or say that the
// driver cannot list them (here for every GPU: ROCm SMI lists all GPUs'
// processes in one call, so a refusal is every GPU's).
TEST_P(TopOnFakeDriverTest, PlainLinesListEachGpusProcesses) {
  const testing::FakeDriver& driver = GetParam();
  const std::string pid = std::to_string(getpid());
  const std::string gpus = "device power_w=300 mem_used_mib=1536\ndevice power_w=150\nprocess device=0 pid=" + pid +
                           " used_mib=1024\n";
  const auto top_lines = [&](const std::string& config) {
    TempDir tmp;
    const auto fake = driver.use(tmp, config);
    const auto r = run_process({JOULE_BINARY, "top", "--once", "--interval-ms", "50"}, driver.env(fake));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return lines_of(r.out);
  };
  auto lines = top_lines(gpus);
  ASSERT_EQ(lines.size(), 3u);  // 2 GPUs, 1 process
  EXPECT_TRUE(std::regex_match(lines[2], std::regex("t=[0-9.]+s gpu0 process pid=" + pid +
                                                    " user=\"[^\"]+\" job=\"[^\"]+\" used_mib=1024 "
                                                    "command=\".*joule_tests.*\"")))
      << lines[2];
  lines = top_lines(gpus + "error function=@processes code=@not_supported\n");
  ASSERT_EQ(lines.size(), 4u);  // 2 GPUs, 2 that cannot tell
  EXPECT_TRUE(std::regex_match(lines[2], std::regex("t=[0-9.]+s gpu0 processes_unknown=\".*" +
                                                    driver.words.at("@processes") + ".*\""))) << lines[2];
  EXPECT_TRUE(std::regex_match(lines[3], std::regex("t=[0-9.]+s gpu1 processes_unknown=\".+\""))) << lines[3];
}

// (The view's table is the same code on every driver: driven once, on the
// fake NVML, where one GPU lists its processes and the other cannot.)
TEST(TopCliTest, TheProcessesKeyTogglesThePerProcessTable) {
  if (!have_tmux()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  TempDir tmp;
  std::map<std::string, std::string> env;
  const std::string pid = fake_nvml_with_processes(tmp, env);
  env["LANG"] = "C.UTF-8";
  env["LC_ALL"] = "";
  TmuxSession tmux(pane_command({"--interval-ms", "200"}, env), 80, 24);
  std::string screen = tmux.wait_for([](const std::string& s) { return gpu0_energy(s) && contains(s, "gpu1 "); });
  ASSERT_TRUE(contains(screen, "p processes")) << screen;
  tmux.send_keys("p");
  screen = tmux.wait_for([](const std::string& s) { return contains(s, "COMMAND"); });
  ASSERT_TRUE(contains(screen, "PID  USER")) << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex("gpu0 +" + pid + " .* 1024 MiB  /"))) << screen;
  EXPECT_TRUE(contains(screen, "gpu1  processes unknown: ")) << screen;
  for (const auto& line : lines_of(screen)) EXPECT_LE(cli::display_width(line), 80) << line;
  tmux.send_keys("p");
  screen = tmux.wait_for([](const std::string& s) { return !contains(s, "COMMAND") && contains(s, "util"); });
  EXPECT_FALSE(contains(screen, "COMMAND")) << screen;
  EXPECT_TRUE(contains(screen, "util")) << screen;
  tmux.send_keys("q");
}

TEST(TopCliTest, OnceAndBadOptions) {
  const auto once = run_process({JOULE_BINARY, "top", "--once", "--sim", "count=1", "--interval-ms", "50"}, kSimEnv);
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_EQ(lines_of(once.out).size(), 1u) << once.out;

  const auto fast = run_process({JOULE_BINARY, "top", "--interval-ms", "10"}, kSimEnv);
  EXPECT_EQ(fast.exit_code, 2);
  EXPECT_TRUE(contains(fast.err, "--interval-ms 10 is outside 50-3600000")) << fast.err;
  const auto unit = run_process({JOULE_BINARY, "top", "--unit", "cal", "--once"}, kSimEnv);
  EXPECT_EQ(unit.exit_code, 2);
  EXPECT_TRUE(contains(unit.err, "unknown unit 'cal'")) << unit.err;
}

}  // namespace
}  // namespace joule
