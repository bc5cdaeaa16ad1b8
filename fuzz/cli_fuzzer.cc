// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The command line: the fuzz bytes are argv (one word per line or NUL),
// parsed by the app `joule` itself builds (src/cli/app.cc), errors and help
// included. What parses as `cluster-trace` is then generated, as the command
// would, into a sink that takes the first 4 KiB (the rest of a 100-million
// job trace would only cost time). A crash, a sanitizer report, an exception
// that main.cc would not turn into exit 2 (a UsageError), or a parse status
// other than 0 (help) and 2 (usage) aborts.
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/app.h"
#include "joule/error.h"
#include "joule/simulate/cluster.h"

namespace {

constexpr std::size_t kMostWords = 64;

// Discards what it is given; throws Full past its capacity.
class BoundedSink final : public std::streambuf {
 public:
  struct Full {};
  explicit BoundedSink(std::size_t capacity) : left_(capacity) {}

 protected:
  int_type overflow(int_type c) override {
    take(1);
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    take(static_cast<std::size_t>(n));
    return n;
  }

 private:
  void take(std::size_t n) {
    if (n > left_) throw Full{};
    left_ -= n;
  }
  std::size_t left_;
};

std::vector<std::string> words_of(const uint8_t* data, std::size_t size) {
  std::vector<std::string> words = {"joule"};
  std::string word;
  for (std::size_t i = 0; i <= size && words.size() < kMostWords; ++i) {
    if (i == size || data[i] == '\n' || data[i] == '\0') {
      words.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  return words;
}

void generate_cluster_trace_bounded(const joule::ClusterTraceShape& shape) {
  BoundedSink sink(4 * 1024);
  std::ostream out(&sink);
  out.exceptions(std::ios::badbit);  // the sink's Full comes back out of the stream
  try {
    joule::generate_cluster_trace(shape, out);
  } catch (const BoundedSink::Full&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::vector<std::string> words = words_of(data, size);
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  // Built once: building the app costs far more than a parse. CLI11 clears
  // what the last parse found; the options of the one command run here are
  // reset, so each input stands alone.
  static joule::cli::CommandLine cli;
  cli.cluster_trace = {};
  std::ostringstream out, err;
  const auto status = joule::cli::parse_command_line(cli, static_cast<int>(argv.size()), argv.data(), out, err);
  if (status) {
    if (*status != 0 && *status != 2) std::abort();
    return 0;
  }
  // As main.cc: a UsageError is exit 2, anything else escapes (a crash).
  try {
    if (*cli.cluster_trace_command) generate_cluster_trace_bounded(cli.cluster_trace.shape);
  } catch (const joule::UsageError&) {
  }
  return 0;
}
