// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Opening a file a user named, with the error a user can act on: a directory
// where a file is expected says so (an ifstream opens a directory and then
// reads nothing, which showed up as "empty file").
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace joule {

// Throws Error "cannot read <what> '<path>': <reason>" (what may be empty).
std::ifstream open_input_file(const std::string& path, const std::string& what = "");

// The whole of a file that may be absent or vanish while read (a /proc or
// /sys entry of a process that exits): nullopt where it cannot be opened or
// read to its end.
std::optional<std::string> read_file_if_present(const std::filesystem::path& path);

}  // namespace joule
