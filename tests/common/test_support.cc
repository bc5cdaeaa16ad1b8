// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace joule::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/joule-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << content;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

FakeNvml use_fake_nvml(const TempDir& dir, const std::string& config, bool old_driver) {
  FakeNvml fake;
  fake.config_path = dir.file("fake_nvml.conf");
  fake.log_path = dir.file("fake_nvml.log");
  fake.library_path = old_driver ? JOULE_FAKE_NVML_OLD_DRIVER_PATH : JOULE_FAKE_NVML_PATH;
  write_file(fake.config_path, config);
  setenv("JOULE_FAKE_NVML_CONFIG", fake.config_path.c_str(), 1);
  setenv("JOULE_FAKE_NVML_LOG", fake.log_path.c_str(), 1);
  return fake;
}

FakeRocmSmi use_fake_rocm_smi(const TempDir& dir, const std::string& config, bool old_library) {
  FakeRocmSmi fake;
  fake.config_path = dir.file("fake_rocm_smi.conf");
  fake.log_path = dir.file("fake_rocm_smi.log");
  fake.library_path = old_library ? JOULE_FAKE_ROCM_SMI_OLD_PATH : JOULE_FAKE_ROCM_SMI_PATH;
  write_file(fake.config_path, config);
  setenv("JOULE_ROCM_SMI_LIBRARY", fake.library_path.c_str(), 1);
  setenv("JOULE_FAKE_ROCM_SMI_CONFIG", fake.config_path.c_str(), 1);
  setenv("JOULE_FAKE_ROCM_SMI_LOG", fake.log_path.c_str(), 1);
  return fake;
}

pid_t start_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                    const std::string& out_path, const std::string& err_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    for (const auto& [key, value] : env) {
      if (value.empty()) {
        unsetenv(key.c_str());
      } else {
        setenv(key.c_str(), value.c_str(), 1);
      }
    }
    FILE* out = std::freopen(out_path.c_str(), "w", stdout);
    FILE* err = std::freopen(err_path.c_str(), "w", stderr);
    if (out == nullptr || err == nullptr) _exit(125);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

ProcessReaper::~ProcessReaper() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

int wait_process(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      throw std::runtime_error("process did not finish in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

RunResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                      double timeout_s) {
  TempDir dir;
  const pid_t pid = start_process(argv, env, dir.file("out"), dir.file("err"));
  RunResult result;
  result.exit_code = wait_process(pid, timeout_s);
  result.out = read_file(dir.file("out"));
  result.err = read_file(dir.file("err"));
  return result;
}

std::string http_get(const std::string& url, double timeout_s) {
  std::ostringstream seconds;
  seconds << timeout_s;
  return run_process({"curl", "-s", "--max-time", seconds.str(), url}, {}, timeout_s + 5.0).out;
}

std::string http_get_until(const std::string& url, const std::function<bool(const std::string&)>& done) {
  std::string body;
  for (int i = 0; i < 100; ++i) {
    body = http_get(url);
    if (done(body)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return body;
}

std::string chromium_body_tag(const std::string& html_path, const TempDir& dir, const std::string& window_size) {
  const char* chromium = "/usr/bin/chromium";
  if (access(chromium, X_OK) != 0) return "";
  std::vector<std::string> argv = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                                   "--no-first-run", "--disable-background-networking", "--disable-component-update",
                                   "--disable-sync", "--hide-scrollbars", "--user-data-dir=" + dir.file("chromium-profile")};
  std::string page = html_path;
  if (!window_size.empty()) {
    // Chromium's window is at least 500 px wide: narrower widths are laid out
    // in an iframe of that size, whose page's <body> attributes are copied out.
    const auto comma = window_size.find(',');
    const std::string width = window_size.substr(0, comma), height = window_size.substr(comma + 1);
    page = dir.file("window-" + width + ".html");
    write_file(page, "<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"f\" src=\"file://" + html_path +
                         "\" style=\"border:0;width:" + width + "px;height:" + height +
                         "px\"></iframe><script>\n"
                         "var f = document.getElementById('f');\n"
                         "f.addEventListener('load', function () {\n"
                         "  var b = f.contentDocument.body;\n"
                         "  for (var i = 0; i < b.attributes.length; i++) "
                         "document.body.setAttribute(b.attributes[i].name, b.attributes[i].value);\n"
                         "});\n</script></body></html>\n");
    argv.push_back("--allow-file-access-from-files");
    argv.push_back("--window-size=" + std::to_string(std::max(500, std::stoi(width))) + "," + height);
  }
  argv.push_back("--dump-dom");
  argv.push_back("file://" + page);
  const RunResult dom = run_process(argv, {}, 120);
  const auto body = dom.out.find("<body");
  if (body == std::string::npos) return "chromium drew no page: " + dom.err;
  return dom.out.substr(body, dom.out.find('>', body) - body + 1);
}

std::string tag_attribute(const std::string& tag, const std::string& name) {
  const std::string opening = " " + name + "=\"";
  const auto at = tag.find(opening);
  if (at == std::string::npos) return "";
  const auto begin = at + opening.size();
  return tag.substr(begin, tag.find('"', begin) - begin);
}

const std::map<std::string, std::string>& simulated_only_env() {
  static const std::map<std::string, std::string> env = {{"JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
                                                         {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"},
                                                         {"JOULE_POWERCAP_ROOT", "/nonexistent/powercap"},
                                                         {"JOULE_DAEMON_SOCKET", "/nonexistent/jouled.sock"},
                                                         {"JOULE_SIM", ""}};
  return env;
}

int wait_for_port_file(const std::string& path, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string text = std::filesystem::exists(path) ? read_file(path) : "";
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
  }
  return 0;
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

RawConnection::RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  if (connected_) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::send_text(std::string_view text) {
  return send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

bool RawConnection::readable_now() const {
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

std::string RawConnection::take() {
  std::string got;
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      got.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed_ = true;
    return got;
  }
}

std::string RawConnection::wait(double timeout_s) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return "";
  return take();
}

std::string RawConnection::answer(double timeout_s) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!closed_ && std::chrono::steady_clock::now() < deadline) {
    got += wait(0.05);
    const auto head_end = got.find("\r\n\r\n");
    const auto length = got.find("Content-Length: ");
    if (head_end != std::string::npos && length != std::string::npos &&
        got.size() >= head_end + 4 + std::stoul(got.substr(length + 16))) {
      break;
    }
  }
  return got;
}

std::string RawConnection::read_until_closed(double timeout_s) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!closed_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const std::string more = wait(static_cast<double>(left.count()) / 1000.0);
    if (more.empty() && !closed_) break;  // nothing within the time left
    got += more;
  }
  return got;
}

bool servers_required() {
  const char* value = std::getenv("JOULE_TESTS_REQUIRE_SERVERS");
  return value && std::string(value) == "1";
}

}  // namespace joule::testing
