// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Small text helpers shared by modules that quote other programs' output.
#pragma once

#include <cctype>
#include <string>

namespace joule {

// text without the whitespace (newlines, spaces, \r, tabs) at its end: a
// helper program's output or a library's message, quoted inside ours.
inline std::string without_trailing_space(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

}  // namespace joule
