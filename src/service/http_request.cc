// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The transport's reading of a request line, apart from Asio so that the
// service's fuzzer decodes targets with the very same code.
#include <cctype>
#include <string>

#include "service/http_transport.h"

namespace joule::service::http {

bool is_loopback_address(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0;
}

namespace {

// %XX decoded ('+' kept); a '%' without two hex digits after it is kept as
// it is, and the first one's offset (plus `offset`) noted in malformed_at.
std::string percent_decoded(std::string_view text, std::size_t offset, std::optional<std::size_t>& malformed_at) {
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) && hex(text[i + 2])) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
      continue;
    }
    if (text[i] == '%' && !malformed_at) malformed_at = offset + i;
    out += text[i];
  }
  return out;
}

}  // namespace

Request request_of(std::string_view method, std::string_view target) {
  Request r;
  r.method = std::string(method);
  r.target = std::string(target);
  const std::size_t question = target.find('?');
  r.path = percent_decoded(target.substr(0, question), 0, r.malformed_escape_at);
  if (question != std::string_view::npos) {
    r.query = percent_decoded(target.substr(question + 1), question + 1, r.malformed_escape_at);
  }
  return r;
}

}  // namespace joule::service::http
