// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Who may use `joule serve` from other machines: bearer tokens, kept in a
// file as their SHA-256 only, each naming its user and the jobs it may use.
//
//   # joule serve tokens: the SHA-256 of each token, never the token itself
//   sha256:9f86d081...  user=alice  jobs=resnet50,bert-*
//   sha256:60303ae2...  user=ci     jobs=*
//
// A job pattern is a job's name, a prefix ending in '*', or '*' (every job,
// and registering new ones). A token is 32 random bytes written as "joule_"
// and 64 hex digits: long enough that a plain SHA-256 of it cannot be
// reversed, so the file needs no slow password hash and a check costs ~1 us.
// `joule tokens create|list|revoke` edit the file; the server re-reads it
// when it changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace joule::service {

struct TokenGrant {
  std::string user;
  std::vector<std::string> job_patterns;

  bool allows(const std::string& job) const;
};

struct TokenLine {
  std::string sha256_hex;
  TokenGrant grant;
};

// "sha256:<64 hex>" of text.
std::string token_digest(const std::string& token);

// Reads a tokens file: every line, in order. Throws Error naming path:line
// for a line that is not "sha256:HEX user=NAME jobs=PATTERN[,PATTERN...]"
// (blank lines and '#' comments are skipped).
std::vector<TokenLine> read_token_file(const std::string& path);

// Makes a token for user and jobs, appends its digest line to path (created
// with mode 0644 when missing: digests cannot be turned back into tokens,
// and the service, often another user, must read them), and returns the
// token: the only time it is shown. Throws UsageError for an empty user or a bad pattern.
std::string create_token(const std::string& path, const std::string& user, const std::vector<std::string>& jobs);

// Removes every line of user (or whose digest starts with user, for one
// token among several): the file is rewritten to a temporary file and
// renamed over the old one (keeping its mode), so a reader sees the old or
// the new file, never a half. Returns the lines removed.
int revoke_tokens(const std::string& path, const std::string& user_or_digest_prefix);

// The server's view of the file: grants by digest, re-read when the file's
// modification time or size changes (checked at most once a second). A file
// that turns unreadable or malformed keeps the last good grants (a typo must
// not lock every client out), and log hears of it once per change.
class TokenFile {
 public:
  // Throws Error when the file cannot be read or parsed at start.
  explicit TokenFile(std::string path, std::function<void(const std::string&)> log = nullptr);
  std::optional<TokenGrant> grant(const std::string& token);
  const std::string& path() const { return path_; }
  // The last reload's error, if the last reload failed.
  std::optional<std::string> reload_error() const;

 private:
  void reload_if_changed();

  std::string path_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mutex_;
  std::vector<TokenLine> lines_;
  std::pair<int64_t, int64_t> version_;  // modification time (ns) and size, as last read
  std::chrono::steady_clock::time_point checked_;
  std::optional<std::string> reload_error_;
};

}  // namespace joule::service
