// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/input_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>

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

std::optional<std::string> read_file_if_present(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;  // a read error (EISDIR, a process gone mid-read), not the end
  return text;
}

}  // namespace joule
