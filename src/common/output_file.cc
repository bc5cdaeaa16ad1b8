// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/output_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "joule/error.h"

namespace joule {

OutputFile::OutputFile(std::string path) : path_(std::move(path)), partial_path_(path_ + ".partial") {
  out_.open(partial_path_, std::ios::out | std::ios::trunc);
  if (!out_) throw UsageError(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (committed_) return;
  out_.close();
  std::remove(partial_path_.c_str());
}

void OutputFile::commit() {
  out_.flush();
  if (!out_) throw Error(fmt::format("error writing '{}'", path_));
  out_.close();
  if (std::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("cannot move '{}' into place: {}", path_, std::strerror(errno)));
  }
  committed_ = true;
}

}  // namespace joule
