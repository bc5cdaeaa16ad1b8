// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/daemon/config.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "joule/common/input_file.h"
#include "joule/error.h"

namespace joule::daemon {

namespace {

std::optional<std::string> user_name(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return std::string(pw->pw_name);
  return std::nullopt;
}

bool in_group(uid_t uid, gid_t gid, const std::string& group) {
  const ::group* gr = getgrnam(group.c_str());
  if (gr == nullptr) return false;
  if (gr->gr_gid == gid) return true;
  const passwd* pw = getpwuid(uid);
  if (pw == nullptr) return false;
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<std::size_t>(std::max(count, 0)));
  return std::find(groups.begin(), groups.end(), gr->gr_gid) != groups.end();
}

}  // namespace

DaemonConfig DaemonConfig::load(const std::string& path) {
  std::ifstream in;
  try {
    in = open_input_file(path, "config");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("config '{}': not valid JSON: {}", path, e.what()));
  }
  auto fail = [&](const std::string& what) { return UsageError(fmt::format("config '{}': {}", path, what)); };
  if (!j.is_object()) throw fail("the top level must be an object");
  DaemonConfig config;
  for (const auto& [key, value] : j.items()) {
    if (key == "socket") {
      if (!value.is_string() || value.get<std::string>().empty()) throw fail("\"socket\" must be a path");
      config.socket_path = value.get<std::string>();
    } else if (key == "socket_mode") {
      const std::string text = value.is_string() ? value.get<std::string>() : "";
      char* end = nullptr;
      const unsigned long mode = std::strtoul(text.c_str(), &end, 8);
      if (text.empty() || *end != '\0' || mode > 0777) throw fail("\"socket_mode\" must be an octal string such as \"0660\"");
      config.socket_mode = static_cast<unsigned>(mode);
    } else if (key == "socket_group") {
      if (!value.is_string() || getgrnam(value.get<std::string>().c_str()) == nullptr) {
        throw fail(fmt::format("\"socket_group\": no such group {}", value.dump()));
      }
      config.socket_group = value.get<std::string>();
    } else if (key == "state_file") {
      if (!value.is_string() || value.get<std::string>().empty()) throw fail("\"state_file\" must be a path");
      config.state_path = value.get<std::string>();
    } else if (key == "allow") {
      if (!value.is_array()) throw fail("\"allow\" must be a list of rules");
      for (std::size_t i = 0; i < value.size(); ++i) {
        const auto& r = value[i];
        const std::string where = fmt::format("\"allow\"[{}]", i);
        if (!r.is_object()) throw fail(where + " must be an object");
        AllowRule rule;
        for (const auto& [rkey, rvalue] : r.items()) {
          if (rkey == "user") {
            if (!rvalue.is_string() || getpwnam(rvalue.get<std::string>().c_str()) == nullptr) {
              throw fail(fmt::format("{}: no such user {}", where, rvalue.dump()));
            }
            rule.user = rvalue.get<std::string>();
          } else if (rkey == "group") {
            if (!rvalue.is_string() || getgrnam(rvalue.get<std::string>().c_str()) == nullptr) {
              throw fail(fmt::format("{}: no such group {}", where, rvalue.dump()));
            }
            rule.group = rvalue.get<std::string>();
          } else if (rkey == "gpus") {
            if (rvalue == "all") continue;
            if (!rvalue.is_array()) throw fail(where + ": \"gpus\" must be \"all\" or a list of indices");
            std::vector<unsigned> gpus;
            for (const auto& g : rvalue) {
              if (!g.is_number_unsigned()) throw fail(where + ": \"gpus\" must hold GPU indices");
              gpus.push_back(g.get<unsigned>());
            }
            rule.gpus = gpus;
          } else {
            throw fail(fmt::format("{}: unknown key \"{}\" (user, group, gpus)", where, rkey));
          }
        }
        if (rule.user.has_value() == rule.group.has_value()) throw fail(where + " needs exactly one of \"user\", \"group\"");
        config.allow.push_back(rule);
      }
    } else {
      throw fail(fmt::format("unknown key \"{}\" (socket, socket_mode, socket_group, state_file, allow)", key));
    }
  }
  return config;
}

bool DaemonConfig::allows(uid_t uid, gid_t gid, unsigned gpu, std::string* why) const {
  const std::string who = user_name(uid).value_or(fmt::format("uid {}", uid));
  if (uid == 0) {
    if (why) *why = "root";
    return true;
  }
  for (const auto& rule : allow) {
    const bool matches = rule.user ? *rule.user == who : in_group(uid, gid, *rule.group);
    if (!matches) continue;
    if (rule.gpus && std::find(rule.gpus->begin(), rule.gpus->end(), gpu) == rule.gpus->end()) continue;
    if (why) *why = rule.user ? "user " + *rule.user : "group " + *rule.group;
    return true;
  }
  if (why) *why = fmt::format("{} is not allowed to change gpu{} (no rule in the jouled config allows it)", who, gpu);
  return false;
}

}  // namespace joule::daemon
