// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the tests: temporary directories, files, the fake NVML
// library, and running real processes (the joule binary) to completion.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace joule::testing {

// A fresh directory under $TMPDIR, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);
std::vector<std::string> read_lines(const std::string& path);

// Points the fake libnvidia-ml.so.1 at a config (written into dir) and a
// set-call log; returns the library path to load.
struct FakeNvml {
  std::string config_path;
  std::string log_path;
  std::string library_path;
};
FakeNvml use_fake_nvml(const TempDir& dir, const std::string& config, bool old_driver = false);

// The fake librocm_smi64.so.1 (tests/fake_rocm_smi) with config written to
// dir: sets JOULE_ROCM_SMI_LIBRARY (what joule loads) to it and the fake's
// config and set-call log variables. old_library: the build without
// rsmi_dev_current_socket_power_get (a ROCm 5 library).
struct FakeRocmSmi {
  std::string config_path;
  std::string log_path;
  std::string library_path;
};
FakeRocmSmi use_fake_rocm_smi(const TempDir& dir, const std::string& config, bool old_library = false);

struct RunResult {
  int exit_code = -1;  // as a shell reports it (128 + signal when killed)
  std::string out;
  std::string err;
};

// Simulated GPUs only, whatever the machine running the tests has: no driver,
// no RAPL tree, no jouled, the default simulated GPUs. For run_process.
const std::map<std::string, std::string>& simulated_only_env();

// Runs argv with the current environment plus env (an empty value unsets),
// waiting at most timeout_s before killing it.
RunResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                      double timeout_s = 60.0);

// The body of an HTTP GET of url through curl ("" when nothing answered
// within timeout_s).
std::string http_get(const std::string& url, double timeout_s = 5.0);
// GETs url every 100 ms until done(body) holds, 100 times at most; the last body.
std::string http_get_until(const std::string& url, const std::function<bool(const std::string&)>& done);

// Opens an HTML page in headless Chromium (a profile under dir) and returns
// its <body ...> tag after the page's scripts ran (the reports mark there how
// many charts drew and what overflows), or "" when /usr/bin/chromium is not
// installed. window_size ("390,900") sets the window the page is laid out in.
std::string chromium_body_tag(const std::string& html_path, const TempDir& dir, const std::string& window_size = "");

// The value of attribute `name` in a tag such as chromium_body_tag returns;
// "" when absent.
std::string tag_attribute(const std::string& tag, const std::string& name);

// The port a server started with --port-file wrote there (a whole line),
// waiting up to timeout_s for it; 0 when none came.
int wait_for_port_file(const std::string& path, double timeout_s = 10.0);

// A loopback port nothing listens on now (the kernel's pick; another
// process may still take it before the caller binds it).
int free_loopback_port();

// A client the C++ client cannot be: raw bytes over TCP to a loopback port
// (non-blocking once connected; every read waits in poll() first).
class RawConnection {
 public:
  explicit RawConnection(int port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool send_text(std::string_view text);
  // True when the server has sent something or closed (without waiting).
  bool readable_now() const;
  // What has come, without waiting; sets closed() at the end of the stream (or a reset).
  std::string take();
  // Waits up to timeout_s for the server to send or close; what it sent.
  std::string wait(double timeout_s);
  // An answer: waits until it holds a whole header and Content-Length bytes of body.
  std::string answer(double timeout_s);
  // What the server sends until it closes the connection, waiting at most
  // timeout_s; closed() says whether it closed.
  std::string read_until_closed(double timeout_s);
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

// Starts argv in the background with stdout/stderr to files in dir.
pid_t start_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                    const std::string& out_path, const std::string& err_path);
// Waits for pid; returns the shell-style exit code.
int wait_process(pid_t pid, double timeout_s = 60.0);

// A process started with start_process that a failed assertion must not
// leave running: SIGKILLed and reaped when this goes out of scope, unless
// the test waited for it itself (waited()).
class ProcessReaper {
 public:
  explicit ProcessReaper(pid_t pid) : pid_(pid) {}
  ~ProcessReaper();
  ProcessReaper(const ProcessReaper&) = delete;
  ProcessReaper& operator=(const ProcessReaper&) = delete;
  void waited() { pid_ = -1; }

 private:
  pid_t pid_;
};

// Whether the real servers the tests start (PostgreSQL, Prometheus) must
// run: $JOULE_TESTS_REQUIRE_SERVERS=1 (set by scripts/test.sh, so CI fails
// where a local run would skip for want of one).
bool servers_required();

}  // namespace joule::testing

// Skips the test for `reason`, or fails it where the servers are required.
#define JOULE_SKIP_WITHOUT_SERVER(reason)                          \
  do {                                                             \
    if (::joule::testing::servers_required()) FAIL() << (reason);  \
    GTEST_SKIP() << (reason);                                      \
  } while (0)
