// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Bytes from outside (requests, files, process names, driver strings) on
// their way into JSON or text: checked for UTF-8, and shown safely when they
// are not. nlohmann::json::dump() throws on invalid UTF-8, Prometheus and
// terminals garble it: every outside string passes one of these first.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace joule {

// The offset of the first byte that does not begin or continue a
// well-formed UTF-8 sequence (overlong forms, surrogates and code points
// past U+10FFFF are ill-formed too), or nullopt when all of text is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) { return !first_invalid_utf8(text).has_value(); }

// text for an error message or a log line: valid UTF-8 kept, every byte of
// an ill-formed sequence and every ASCII control character written as \xHH
// (a backslash as \\), so the result is valid UTF-8 on one line and two
// different inputs never read the same.
std::string printable(std::string_view text);

// Outside text where it will be shown whole (JSON, a Python str, a label
// value): kept as it is when it is valid UTF-8, control characters and all,
// else printable(text).
std::string valid_utf8_or_printable(std::string_view text);

}  // namespace joule
