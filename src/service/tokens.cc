// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/service/tokens.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "joule/error.h"

namespace joule::service {
namespace {

constexpr std::string_view kDigestPrefix = "sha256:";
constexpr std::string_view kTokenPrefix = "joule_";
constexpr std::size_t kTokenBytes = 32;

std::string hex(const unsigned char* bytes, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

bool valid_pattern(const std::string& p) {
  if (p.empty()) return false;
  const std::size_t star = p.find('*');
  if (star != std::string::npos && star != p.size() - 1) return false;  // only a trailing '*'
  return std::all_of(p.begin(), p.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '*';
  });
}

bool valid_user(const std::string& u) {
  return !u.empty() && std::all_of(u.begin(), u.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '@';
  });
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, by);) out.push_back(part);
  return out;
}

// One line: "sha256:HEX user=NAME jobs=A,B". Throws a message without the place.
TokenLine parse_line(const std::string& line) {
  std::istringstream in(line);
  std::string digest, user, jobs, extra;
  in >> digest >> user >> jobs >> extra;
  const bool digest_ok = digest.rfind(kDigestPrefix, 0) == 0 && digest.size() == kDigestPrefix.size() + 64 &&
                         std::all_of(digest.begin() + kDigestPrefix.size(), digest.end(), [](unsigned char c) {
                           return std::isdigit(c) || (c >= 'a' && c <= 'f');
                         });
  if (!digest_ok) throw std::runtime_error("expected 'sha256:' and 64 lowercase hex digits first");
  if (user.rfind("user=", 0) != 0 || !valid_user(user.substr(5))) {
    throw std::runtime_error("expected user=NAME (letters, digits, '-', '_', '.', '@') second");
  }
  if (jobs.rfind("jobs=", 0) != 0) throw std::runtime_error("expected jobs=PATTERN[,PATTERN...] third");
  if (!extra.empty()) throw std::runtime_error(fmt::format("unexpected '{}' after jobs=", extra));
  TokenLine t{digest, {user.substr(5), split(jobs.substr(5), ',')}};
  if (t.grant.job_patterns.empty() ||
      !std::all_of(t.grant.job_patterns.begin(), t.grant.job_patterns.end(), valid_pattern)) {
    throw std::runtime_error("a job pattern is a job name, a prefix ending in '*', or '*'");
  }
  return t;
}

// Every line of a tokens file as written, with its token (none for blank
// lines and comments). Throws Error naming path:line for a line that does not
// parse.
std::vector<std::pair<std::string, std::optional<TokenLine>>> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("tokens file '{}': cannot read it ({})", path, std::strerror(errno)));
  std::vector<std::pair<std::string, std::optional<TokenLine>>> out;
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t");
    std::optional<TokenLine> token;
    if (first != std::string::npos && line[first] != '#') {
      try {
        token = parse_line(line);
      } catch (const std::runtime_error& e) {
        throw Error(fmt::format("tokens file '{}', line {}: {}", path, out.size() + 1, e.what()));
      }
    }
    out.emplace_back(std::move(line), std::move(token));
  }
  return out;
}

// What a file's modification time and size say: changed or not.
std::pair<int64_t, int64_t> file_version(const struct stat& st) {
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, st.st_size};
}

std::string format_line(const TokenLine& t) {
  return fmt::format("{} user={} jobs={}\n", t.sha256_hex, t.grant.user, fmt::join(t.grant.job_patterns, ","));
}

}  // namespace

bool TokenGrant::allows(const std::string& job) const {
  return std::any_of(job_patterns.begin(), job_patterns.end(), [&](const std::string& p) {
    if (!p.empty() && p.back() == '*') return job.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0;
    return job == p;
  });
}

std::string token_digest(const std::string& token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(token.data(), token.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw Error("tokens: SHA-256 failed (libcrypto)");
  }
  return std::string(kDigestPrefix) + hex(digest, length);
}

std::vector<TokenLine> read_token_file(const std::string& path) {
  std::vector<TokenLine> out;
  for (auto& [text, token] : read_lines(path)) {
    if (token) out.push_back(std::move(*token));
  }
  return out;
}

std::string create_token(const std::string& path, const std::string& user, const std::vector<std::string>& jobs) {
  if (!valid_user(user)) throw UsageError("tokens: the user is letters, digits, '-', '_', '.' or '@'");
  if (jobs.empty() || !std::all_of(jobs.begin(), jobs.end(), valid_pattern)) {
    throw UsageError("tokens: name the jobs: a job name, a prefix ending in '*', or '*' (comma-separated)");
  }
  unsigned char bytes[kTokenBytes];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    throw Error(fmt::format("tokens: no random bytes ({})", std::strerror(errno)));
  }
  const std::string token = std::string(kTokenPrefix) + hex(bytes, sizeof bytes);
  const std::string line = format_line({token_digest(token), {user, jobs}});
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("tokens file '{}': cannot open it ({})", path, std::strerror(errno)));
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) throw Error(fmt::format("tokens file '{}': cannot write it", path));
  return token;
}

int revoke_tokens(const std::string& path, const std::string& user_or_digest_prefix) {
  if (user_or_digest_prefix.empty()) throw UsageError("tokens: name the user or the digest to revoke");
  const bool by_digest = user_or_digest_prefix.rfind(kDigestPrefix, 0) == 0;
  std::string kept;
  int removed = 0;
  for (const auto& [text, token] : read_lines(path)) {  // a file that does not parse is not rewritten
    if (token && (token->grant.user == user_or_digest_prefix ||
                  (by_digest && token->sha256_hex.rfind(user_or_digest_prefix, 0) == 0))) {
      ++removed;
      continue;
    }
    kept += text + "\n";
  }
  const std::string temporary = path + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kept;
    if (!out.flush()) throw Error(fmt::format("tokens file '{}': cannot write {}", path, temporary));
  }
  struct stat old {};
  ::chmod(temporary.c_str(), ::stat(path.c_str(), &old) == 0 ? (old.st_mode & 07777) : 0644);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Error(fmt::format("tokens file '{}': cannot replace it ({})", path, std::strerror(errno)));
  }
  return removed;
}

TokenFile::TokenFile(std::string path, std::function<void(const std::string&)> log)
    : path_(std::move(path)), log_(std::move(log)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    throw Error(fmt::format("tokens file '{}': cannot read it ({})", path_, std::strerror(errno)));
  }
  lines_ = read_token_file(path_);
  version_ = file_version(st);
  checked_ = std::chrono::steady_clock::now();
}

std::optional<TokenGrant> TokenFile::grant(const std::string& token) {
  const std::string digest = token_digest(token);
  std::lock_guard lock(mutex_);
  reload_if_changed();
  for (const TokenLine& t : lines_) {
    if (t.sha256_hex == digest) return t.grant;
  }
  return std::nullopt;
}

std::optional<std::string> TokenFile::reload_error() const {
  std::lock_guard lock(mutex_);
  return reload_error_;
}

void TokenFile::reload_if_changed() {
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_ < std::chrono::seconds(1)) return;
  checked_ = now;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    const std::string error =
        fmt::format("tokens file '{}': cannot read it ({}); the last grants stay", path_, std::strerror(errno));
    if (log_ && reload_error_ != error) log_(error);
    reload_error_ = error;
    return;
  }
  if (file_version(st) == version_) return;
  version_ = file_version(st);  // a bad file is reported once, not on every request
  try {
    lines_ = read_token_file(path_);
    reload_error_.reset();
    if (log_) log_(fmt::format("tokens file '{}' re-read: {} token{}", path_, lines_.size(), lines_.size() == 1 ? "" : "s"));
  } catch (const Error& e) {
    reload_error_ = fmt::format("{}; the last grants stay", e.what());
    if (log_) log_(*reload_error_);
  }
}

}  // namespace joule::service
