// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "daemon/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "joule/common/utf8.h"
#include "joule/device/power_limit_facts.h"

namespace joule::daemon {

namespace {

constexpr std::size_t kMaxClients = 256;

std::string watts(uint32_t mw) { return fmt::format("{:.1f} W", mw / 1000.0); }

void send_all(int fd, const std::string& text) {
  // Replies are small; a client that does not read them is dropped by the
  // caller when this fails, rather than blocking every other client.
  std::size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(fmt::format("send: {}", std::strerror(errno)));
    sent += static_cast<std::size_t>(n);
  }
}

nlohmann::json lease_record(const Gpu& gpu, unsigned index, const Lease& lease, pid_t pid, uid_t uid) {
  nlohmann::json clocks = nlohmann::json::object();
  for (const auto& [domain, original] : lease.original_clocks) clocks[to_string(domain)] = clock_lock_json(original);
  return {{"gpu", index},  {"uuid", gpu.uuid()}, {"original_limit_mw", lease.original_limit_mw},
          {"clocks", clocks}, {"pid", pid},       {"uid", uid}};
}

Lease lease_from_record(const nlohmann::json& record) {
  Lease lease;
  lease.original_limit_mw = record.at("original_limit_mw").get<uint32_t>();
  const nlohmann::json clocks = record.value("clocks", nlohmann::json::object());
  for (const auto& [name, lock] : clocks.items()) {
    const std::optional<ClockDomain> domain = clock_domain_from_string(name);
    if (!domain) throw ProtocolError(fmt::format("unknown clock domain \"{}\"", name));
    lease.original_clocks[*domain] = clock_lock_from_json(lock, "clocks");
  }
  return lease;
}

struct PutBack {
  std::string changes;                // "150.0 W -> 300.0 W, sm clock 210-1410 MHz -> unlocked"
  std::vector<std::string> failures;  // the driver's reasons, where a value could not be put back
};

// Puts back every value the lease found, each on its own: a failure on one
// leaves the others restored. clocks_known is false after a restart, when
// nothing says which lock the driver holds, so each recorded one is reapplied.
PutBack put_back(Gpu& gpu, const Lease& lease, bool clocks_known) {
  PutBack result;
  auto attempt = [&](auto&& change) {
    try {
      change();
    } catch (const DeviceError& e) {
      result.failures.push_back(e.what());
    }
  };
  attempt([&] {
    const uint32_t current = gpu.power_limit_mw();
    if (current != lease.original_limit_mw) gpu.set_power_limit_mw(lease.original_limit_mw);
    result.changes = fmt::format("{} -> {}", watts(current), watts(lease.original_limit_mw));
  });
  for (const auto& [domain, original] : lease.original_clocks) {
    attempt([&, domain = domain, original = original] {
      const std::optional<ClockLock> current = gpu.clock_lock_mhz(domain);
      if (!clocks_known || current != original) {
        if (original) {
          gpu.lock_clock_mhz(domain, *original);
        } else {
          gpu.reset_clock_lock(domain);
        }
      }
      result.changes += fmt::format("{}{} clock {} -> {}", result.changes.empty() ? "" : ", ", to_string(domain),
                                    clocks_known ? describe(current) : "unknown", describe(original));
    });
  }
  return result;
}

}  // namespace

Server::Server(DaemonConfig config, std::vector<std::shared_ptr<Gpu>> gpus, Log log)
    : config_(std::move(config)), gpus_(std::move(gpus)), log_(std::move(log)) {}

Server::~Server() {
  for (auto& [fd, client] : clients_) close(fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(config_.socket_path.c_str());
  }
}

void Server::recover() {
  std::ifstream in(config_.state_path);
  if (!in) return;  // nothing recorded
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    // Keep the file for a human to look at; do not guess.
    throw Error(fmt::format("state file '{}' is unreadable ({}); a previous jouled may have left GPUs changed. "
                            "Check them with 'joule info', then remove the file.",
                            config_.state_path, e.what()));
  }
  for (const auto& record : state.value("leases", nlohmann::json::array())) {
    const unsigned gpu = record.at("gpu").get<unsigned>();
    if (gpu >= gpus_.size() || gpus_[gpu]->uuid() != record.value("uuid", "")) {
      log(fmt::format("recover: gpu{} ({}) recorded in the state file is not present; skipped", gpu,
                      record.value("uuid", "?")));
      continue;
    }
    Lease lease;
    try {
      lease = lease_from_record(record);
    } catch (const std::exception& e) {
      throw Error(fmt::format("state file '{}': a lease of gpu{} is unreadable ({}); check the GPU with 'joule info', "
                              "then remove the file.", config_.state_path, gpu, e.what()));
    }
    const PutBack done = put_back(*gpus_[gpu], lease, /*clocks_known=*/false);
    log(fmt::format("recover: gpu{} {} (left by a previous jouled for pid {}, uid {})", gpu, done.changes,
                    record.value("pid", 0), record.value("uid", 0)));
    for (const std::string& failure : done.failures) {
      log(fmt::format("recover: FAILED on gpu{}: {}; kept in the state file", gpu, failure));
    }
    if (!done.failures.empty()) unrestored_.push_back(record);
  }
  write_state();
}

void Server::write_state() {
  nlohmann::json leases = unrestored_;
  for (const auto& [fd, client] : clients_) {
    for (const auto& [gpu, lease] : client.leases) {
      leases.push_back(lease_record(*gpus_[gpu], gpu, lease, client.pid, client.uid));
    }
  }
  const nlohmann::json state = {{"v", 1}, {"leases", leases}};
  const std::string temporary = config_.state_path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << state.dump() << '\n';
    out.flush();
    if (!out) throw Error(fmt::format("cannot write state file '{}'", temporary));
  }
  // fsync so the record survives a crash of the machine, not only of jouled.
  if (const int fd = open(temporary.c_str(), O_RDONLY); fd >= 0) {
    fsync(fd);
    close(fd);
  }
  if (std::rename(temporary.c_str(), config_.state_path.c_str()) != 0) {
    throw Error(fmt::format("cannot replace state file '{}': {}", config_.state_path, std::strerror(errno)));
  }
}

void Server::listen() {
  // Bound, listening and given its owner and mode under a temporary name,
  // then renamed into place: a client that sees the socket can connect to
  // it (between bind and listen it would be refused) with its final mode.
  const std::string temporary = config_.socket_path + ".new";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (temporary.size() >= sizeof address.sun_path) {
    throw UsageError(fmt::format("socket path '{}' is too long", config_.socket_path));
  }
  std::strcpy(address.sun_path, temporary.c_str());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(config_.socket_path).parent_path(), ec);
  unlink(temporary.c_str());  // left by an instance that died while starting
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw Error(fmt::format("cannot listen on '{}': {}", config_.socket_path, std::strerror(errno)));
  }
  gid_t group = static_cast<gid_t>(-1);
  if (config_.socket_group) group = getgrnam(config_.socket_group->c_str())->gr_gid;
  if (chown(temporary.c_str(), static_cast<uid_t>(-1), group) != 0 ||
      chmod(temporary.c_str(), config_.socket_mode) != 0) {
    throw Error(fmt::format("cannot set owner/mode of '{}': {}", config_.socket_path, std::strerror(errno)));
  }
  // Replaces a stale socket of a dead instance in one step.
  if (std::rename(temporary.c_str(), config_.socket_path.c_str()) != 0) {
    throw Error(fmt::format("cannot listen on '{}': {}", config_.socket_path, std::strerror(errno)));
  }
  log(fmt::format("listening on {} (mode {:04o}{}) for {} GPU{}", config_.socket_path, config_.socket_mode,
                  config_.socket_group ? ", group " + *config_.socket_group : "", gpus_.size(),
                  gpus_.size() == 1 ? "" : "s"));
}

void Server::accept_client() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  if (clients_.size() >= kMaxClients) {
    try {
      send_all(fd, error_response(std::nullopt, "busy", "too many clients"));
    } catch (const Error&) {
    }
    close(fd);
    return;
  }
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    close(fd);
    return;
  }
  Client client;
  client.fd = fd;
  client.pid = credentials.pid;
  client.uid = credentials.uid;
  client.gid = credentials.gid;
  const passwd* pw = getpwuid(credentials.uid);
  client.user = pw ? pw->pw_name : std::to_string(credentials.uid);
  client.who = fmt::format("{} (uid {}, pid {})", pw ? pw->pw_name : "?", credentials.uid, credentials.pid);
  clients_.emplace(fd, std::move(client));
}

bool Server::read_client(Client& client) {
  char chunk[4096];
  while (true) {
    const ssize_t n = read(client.fd, chunk, sizeof chunk);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    client.buffer.append(chunk, static_cast<std::size_t>(n));
    std::size_t newline;
    while ((newline = client.buffer.find('\n')) != std::string::npos) {
      const std::string line = client.buffer.substr(0, newline);
      client.buffer.erase(0, newline + 1);
      std::string reply;
      try {
        reply = handle(client, parse_request(line));
      } catch (const ProtocolError& e) {  // its text holds no client bytes that are not printable
        log(fmt::format("refused from {}: malformed request: {}", client.who, e.what()));
        reply = error_response(std::nullopt, "invalid", e.what());
      } catch (const std::exception& e) {
        // A bug of the daemon's own: this request fails, the daemon and its leases go on.
        log(fmt::format("internal error answering {}: {}", client.who, printable(e.what())));
        reply = error_response(std::nullopt, "internal", printable(e.what()));
      }
      try {
        send_all(client.fd, reply);
      } catch (const Error&) {
        return false;
      }
    }
    if (client.buffer.size() > kMaxMessageBytes) {
      log(fmt::format("refused from {}: message longer than {} bytes; connection closed", client.who,
                      kMaxMessageBytes));
      try {
        send_all(client.fd, error_response(std::nullopt, "invalid",
                                           fmt::format("message longer than {} bytes", kMaxMessageBytes)));
      } catch (const Error&) {
      }
      return false;
    }
  }
}

std::string Server::state_reply(const Request& request) const {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    Gpu& gpu = *gpus_[i];
    nlohmann::json g = {{"index", i}, {"name", gpu.name()}, {"uuid", gpu.uuid()}};
    add_power_limit_fields(g, read_power_limit_facts(gpu));
    nlohmann::json clocks = nlohmann::json::object();
    for (const ClockDomain domain : kAllClockDomains) {
      const auto supported = try_read([&] { return gpu.supported_clocks_mhz(domain); });
      if (!supported || supported->empty()) continue;
      clocks[to_string(domain)] = {{"lock", clock_lock_json(gpu.clock_lock_mhz(domain))},
                                   {"min_mhz", supported->front()},
                                   {"max_mhz", supported->back()}};
    }
    g["clocks"] = clocks;
    const auto holder = holders_.find(static_cast<unsigned>(i));
    g["held_by"] = nullptr;
    if (holder != holders_.end()) {
      const Client& c = clients_.at(holder->second);
      g["held_by"] = c.who;
      g["holder"] = {{"user", c.user}, {"uid", c.uid}, {"pid", c.pid}};
    }
    list.push_back(g);
  }
  return ok_response(request.id, {{"gpus", list}});
}

Lease& Server::hold(Client& client, unsigned gpu, const std::string& rule) {
  const auto held = client.leases.find(gpu);
  if (held != client.leases.end()) return held->second;
  Lease lease;
  lease.original_limit_mw = gpus_[gpu]->power_limit_mw();
  Lease& stored = client.leases[gpu] = lease;
  holders_[gpu] = client.fd;
  write_state();  // recorded before anything changes
  log(fmt::format("lease gpu{} by {} ({}); will restore {}", gpu, client.who, rule, watts(lease.original_limit_mw)));
  return stored;
}

void Server::remember_clock(Client& client, Lease& lease, unsigned gpu, ClockDomain domain) {
  if (lease.original_clocks.count(domain) > 0) return;
  // jouled's own record of the lock: a lock set outside jouled cannot be read
  // back from the driver, so such a clock is unlocked at the lease's end.
  const std::optional<ClockLock> original = gpus_[gpu]->clock_lock_mhz(domain);
  lease.original_clocks[domain] = original;
  write_state();
  log(fmt::format("lease gpu{} by {}: will restore {} clock {}", gpu, client.who, to_string(domain), describe(original)));
}

std::string Server::handle(Client& client, const Request& request) {
  if (request.op == Op::kState) return state_reply(request);

  const unsigned gpu = *request.gpu;
  const std::string what = fmt::format("{} gpu{}", to_string(request.op), gpu);
  auto refuse = [&](const std::string& code, const std::string& why) {
    log(fmt::format("refused {} from {}: {}", what, client.who, why));
    return error_response(request.id, code, why);
  };
  if (gpu >= gpus_.size()) {
    return refuse("invalid", fmt::format("gpu{} does not exist (this machine has {})", gpu, gpus_.size()));
  }
  std::string rule;
  if (!config_.allows(client.uid, client.gid, gpu, &rule)) return refuse("refused", rule);
  const auto holder = holders_.find(gpu);
  if (holder != holders_.end() && holder->second != client.fd) {
    return refuse("busy", fmt::format("gpu{} is held by {}", gpu, clients_.at(holder->second).who));
  }
  Gpu& device = *gpus_[gpu];
  try {
    switch (request.op) {
      case Op::kLease:
      case Op::kSetPowerLimit:
      case Op::kRestoreDefault: {
        uint32_t limit_mw = 0;
        if (request.op == Op::kRestoreDefault) limit_mw = device.default_power_limit_mw();
        if (request.op == Op::kSetPowerLimit) {
          limit_mw = static_cast<uint32_t>(std::lround(*request.limit_w * 1000.0));
          const PowerLimitRange range = device.power_limit_range_mw();
          if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
            return refuse("invalid", fmt::format("{} is outside gpu{}'s range {}-{}", watts(limit_mw), gpu,
                                                 watts(range.min_mw), watts(range.max_mw)));
          }
        }
        const Lease& lease = hold(client, gpu, rule);
        const uint32_t current = device.power_limit_mw();
        if (request.op != Op::kLease && limit_mw != current) {
          device.set_power_limit_mw(limit_mw);
          log(fmt::format("set gpu{} {} -> {} for {} ({})", gpu, watts(current), watts(limit_mw), client.who, rule));
        }
        return ok_response(request.id, {{"gpu", gpu}, {"power_limit_w", device.power_limit_mw() / 1000.0},
                                        {"restore_limit_w", lease.original_limit_mw / 1000.0}});
      }
      case Op::kLockClock:
      case Op::kResetClock: {
        const ClockDomain domain = *request.domain;
        const std::optional<ClockLock> wanted = request.clock_lock;
        if (wanted) check_clock_lock_in_range(device, domain, *wanted, device.supported_clocks_mhz(domain));
        Lease& lease = hold(client, gpu, rule);
        remember_clock(client, lease, gpu, domain);
        const std::optional<ClockLock> current = device.clock_lock_mhz(domain);
        if (wanted) {
          device.lock_clock_mhz(domain, *wanted);
        } else {
          device.reset_clock_lock(domain);
        }
        log(fmt::format("set gpu{} {} clock {} -> {} for {} ({})", gpu, to_string(domain), describe(current),
                        describe(wanted), client.who, rule));
        return ok_response(request.id, {{"gpu", gpu},
                                        {"domain", to_string(domain)},
                                        {"lock", clock_lock_json(device.clock_lock_mhz(domain))},
                                        {"restore_lock", clock_lock_json(lease.original_clocks.at(domain))}});
      }
      case Op::kRestore:
      case Op::kRelease: {
        if (client.leases.count(gpu) == 0) {
          return refuse("invalid", fmt::format("gpu{} is not held by this connection", gpu));
        }
        if (request.op == Op::kRelease) {
          end_lease(client, gpu, "released");
        } else {
          const PutBack done = put_back(device, client.leases.at(gpu), /*clocks_known=*/true);
          log(fmt::format("restore gpu{} {} for {}", gpu, done.changes, client.who));
          if (!done.failures.empty()) return refuse("device", done.failures.front());
        }
        return ok_response(request.id, {{"gpu", gpu}, {"power_limit_w", device.power_limit_mw() / 1000.0}});
      }
      case Op::kState: break;
    }
  } catch (const DeviceError& e) {
    return refuse(e.code() == DeviceErrc::kInvalidArgument ? "invalid" : "device", e.what());
  }
  return error_response(request.id, "invalid", "unhandled request");
}

void Server::end_lease(Client& client, unsigned gpu, const std::string& why) {
  const Lease& lease = client.leases.at(gpu);
  const PutBack done = put_back(*gpus_[gpu], lease, /*clocks_known=*/true);
  log(fmt::format("restore gpu{} {}: {} {}", gpu, done.changes, client.who, why));
  if (!done.failures.empty()) {
    for (const std::string& failure : done.failures) {
      log(fmt::format("FAILED to restore gpu{} after {} {}: {}; kept in the state file for the next start", gpu,
                      client.who, why, failure));
    }
    unrestored_.push_back(lease_record(*gpus_[gpu], gpu, lease, client.pid, client.uid));
  }
  client.leases.erase(gpu);
  holders_.erase(gpu);
  write_state();
}

void Server::drop(int fd, const std::string& why) {
  Client& client = clients_.at(fd);
  std::vector<unsigned> held;
  for (const auto& [gpu, lease] : client.leases) held.push_back(gpu);
  for (unsigned gpu : held) end_lease(client, gpu, why);
  close(fd);
  clients_.erase(fd);
}

void Server::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, client] : clients_) fds.push_back({fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), 250);
    if (ready < 0 && errno != EINTR) throw Error(fmt::format("poll: {}", std::strerror(errno)));
    if (ready <= 0) continue;
    if (fds[0].revents & POLLIN) accept_client();
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = clients_.find(fds[i].fd);
      if (it == clients_.end()) continue;
      if (!read_client(it->second)) drop(fds[i].fd, "disconnected");
    }
  }
  std::vector<int> open;
  for (const auto& [fd, client] : clients_) open.push_back(fd);
  for (int fd : open) drop(fd, "at daemon shutdown");
  log("stopped");
}

}  // namespace joule::daemon
