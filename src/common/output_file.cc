// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/output_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>

#include "joule/error.h"

namespace joule {

namespace {

// A path that names something other than a regular file (/dev/null,
// /dev/stdout, a FIFO): written where it is. Renaming a file onto it would
// replace it, and as root that turns /dev/null into a regular file for
// every process on the machine.
bool is_special_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace

OutputFile::OutputFile(std::string path)
    : path_(std::move(path)), partial_path_(is_special_file(path_) ? "" : path_ + ".partial") {
  out_.open(in_place() ? path_ : partial_path_, std::ios::out | std::ios::trunc);
  if (!out_) throw UsageError(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (committed_) return;
  out_.close();
  if (!in_place()) std::remove(partial_path_.c_str());
}

void OutputFile::commit() {
  out_.flush();
  if (!out_) throw Error(fmt::format("error writing '{}'", path_));
  out_.close();
  if (!in_place() && std::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("cannot move '{}' into place: {}", path_, std::strerror(errno)));
  }
  committed_ = true;
}

}  // namespace joule
