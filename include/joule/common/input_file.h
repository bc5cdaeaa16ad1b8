// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Opening a file a user named, with the error a user can act on: a directory
// where a file is expected says so (an ifstream opens a directory and then
// reads nothing, which showed up as "empty file").
#pragma once

#include <fstream>
#include <string>

namespace joule {

// Throws Error "cannot read <what> '<path>': <reason>" (what may be empty).
std::ifstream open_input_file(const std::string& path, const std::string& what = "");

}  // namespace joule
