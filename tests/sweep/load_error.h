// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What SweepConfig::load says of a TOML text, from the file's name on
// ("s.toml:2:13: ..."), or "no error". Shared by the sweep tests.
#pragma once

#include <string>

#include "common/test_support.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace joule::testing {

inline std::string sweep_load_error(const std::string& toml) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), toml);
  try {
    SweepConfig::load(tmp.file("s.toml"));
  } catch (const UsageError& e) {
    const std::string message = e.what();
    return message.substr(message.find("s.toml"));
  }
  return "no error";
}

}  // namespace joule::testing
