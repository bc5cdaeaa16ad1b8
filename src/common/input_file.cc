// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/input_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "joule/error.h"

namespace joule {

std::ifstream open_input_file(const std::string& path, const std::string& what) {
  const std::string named = what.empty() ? fmt::format("'{}'", path) : fmt::format("{} '{}'", what, path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(fmt::format("cannot read {}: it is a directory, a file is expected", named));
  }
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read {}: {}", named, std::strerror(errno)));
  return in;
}

}  // namespace joule
