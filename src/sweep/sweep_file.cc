// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sweep file: TOML read and checked (every error naming the file, line
// and column), the grid expanded into runs and each run's command. Apart
// from the runner (sweep.cc) so that it can be read, fuzzed and tested alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

// toml++ 3.3 asserts that a table header's key starts with a key character,
// which "[, 1]" or "[[[1]]" do not, and then reports a parse error, as its
// release builds do (fixed upstream in marzer/tomlplusplus#301): the error,
// not an abort, in debug builds too (the sweep-file fuzzer found it).
#ifndef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#endif
#include <toml++/toml.h>

#include "joule/analyze/sweep_analysis.h"
#include "joule/common/input_file.h"
#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace joule {

namespace {

SourcePosition position_of(const toml::node& node) {
  const auto& begin = node.source().begin;
  return {std::max<uint32_t>(1, begin.line), std::max<uint32_t>(1, begin.column)};
}

std::string value_text(const toml::node& node, const std::string& path, const std::string& key) {
  // value_exact: toml++ 3.3's value<int64_t>() of a float such as 84e80 converts it with undefined
  // behaviour (the sweep-file fuzzer found it); a float stays a float here.
  if (auto v = node.value_exact<int64_t>()) return std::to_string(*v);
  if (auto v = node.value<double>()) {
    if (!std::isfinite(*v)) {
      const SourcePosition at = position_of(node);
      throw UsageError(fmt::format("{}:{}:{}: grid.{}: {} is not a finite number", path, at.line, at.column, key, *v));
    }
    return fmt::format("{}", *v);
  }
  if (auto v = node.value<std::string>()) return *v;
  const SourcePosition at = position_of(node);
  throw UsageError(
      fmt::format("{}:{}:{}: grid.{}: grid values must be numbers or strings", path, at.line, at.column, key));
}

// toml++ 3.3 reaches __builtin_unreachable (undefined behaviour, in release
// builds too) when it asks whether a character from U+00A0 to U+FEFF is
// whitespace, which it does wherever it scans outside a string's quotes: a
// key, a bare value running into a string, the start of a line after a
// backslash in a """ string (marzer/tomlplusplus#190, #295; the sweep-file
// fuzzer found it). So toml++ never sees such a character: every one from
// U+0080 to U+FFFF is read as its twin in plane 15 (U+F0080-U+FFFFF,
// private use, which toml++ classifies safely) and put back in what the
// parser returns. A file holding plane-15 characters itself is refused.
constexpr char32_t kPlane15 = 0xF0000;

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Calls each(code point, its bytes) over valid UTF-8.
template <typename Fn>
void for_each_code_point(std::string_view text, Fn&& each) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? lead : n == 2 ? lead & 0x1F : n == 3 ? lead & 0x0F : lead & 0x07;
    for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    each(c, text.substr(i, n));
    i += n;
  }
}

// The text toml++ reads; throws UsageError naming the line and column of
// bytes that are not UTF-8 or of a plane-15 character.
std::string shift_for_toml(const std::string& text, const std::string& path) {
  std::size_t line = 1, column = 0;
  const auto fail = [&](const std::string& what) {
    return UsageError(fmt::format("{}:{}:{}: {}", path, line, column + 1, what));
  };
  if (const auto bad = first_invalid_utf8(text)) {
    for_each_code_point(std::string_view(text).substr(0, *bad), [&](char32_t c, std::string_view) {
      c == '\n' ? (++line, column = 0) : ++column;
    });
    throw fail(fmt::format("byte 0x{:02x} is not UTF-8 (a sweep file is UTF-8 text)",
                           static_cast<unsigned char>(text[*bad])));
  }
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for_each_code_point(text, [&](char32_t c, std::string_view bytes) {
    if (c >= kPlane15 && c < kPlane15 + 0x10000) throw fail("private-use characters of plane 15 are not supported");
    if (c >= 0x80 && c < 0x10000) append_utf8(out, kPlane15 + c);
    else out += bytes;
    c == '\n' ? (++line, column = 0) : ++column;
  });
  return out;
}

// What toml++ returns (a string, a key, an error's words) as the file wrote it.
std::string unshift(std::string_view text) {
  std::string out;
  for_each_code_point(text, [&](char32_t c, std::string_view bytes) {
    if (c >= kPlane15 + 0x80 && c < kPlane15 + 0x10000) append_utf8(out, c - kPlane15);
    else out += bytes;
  });
  return out;
}

// Every string value of the parsed document, as the file wrote it.
void unshift_strings(toml::node& node) {
  if (auto* text = node.as_string()) {
    text->get() = unshift(text->get());
  } else if (auto* array = node.as_array()) {
    for (auto& element : *array) unshift_strings(element);
  } else if (auto* table = node.as_table()) {
    for (auto&& [key, value] : *table) unshift_strings(value);
  }
}

}  // namespace

std::string SweepConfig::where(const std::string& key, std::size_t value_index) const {
  const auto it = grid_positions.find(key);
  if (it == grid_positions.end() || it->second.empty()) return path;
  const SourcePosition at = it->second[std::min(value_index, it->second.size() - 1)];
  return fmt::format("{}:{}:{}", path, at.line, at.column);
}

SweepConfig SweepConfig::load(const std::string& path) {
  toml::table table;
  try {
    std::ifstream in = open_input_file(path, "sweep file");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    table = toml::parse(shift_for_toml(text, path), path);
    unshift_strings(table);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UsageError(fmt::format("{}:{}:{}: {}", path, where.line, where.column, unshift(e.description())));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  SweepConfig config;
  config.path = path;
  SourcePosition gpus_per_node_at, launcher_options_at;
  // toml++ gives every node its source region: errors name the line and
  // column of the value itself (a key missing altogether has no line).
  auto fail = [&](const toml::node& node, const std::string& what) {
    const SourcePosition at = position_of(node);
    return UsageError(fmt::format("{}:{}:{}: {}", path, at.line, at.column, what));
  };
  const auto fail_at = [&](SourcePosition at, const std::string& what) {
    return UsageError(fmt::format("{}:{}:{}: {}", path, at.line, at.column, what));
  };
  for (const auto& [key, node] : table) {
    const std::string name = unshift(key.str());
    if (name == "command") {
      if (!node.is_string() || node.value<std::string>()->empty()) throw fail(node, "\"command\" must be a string");
      config.command = *node.value<std::string>();
    } else if (name == "launcher") {
      config.launcher = node.value<std::string>().value_or("");
      if (config.launcher != "local" && config.launcher != "torchrun" && config.launcher != "mpirun" &&
          config.launcher != "srun") {
        throw fail(node, "\"launcher\" must be local, torchrun, mpirun or srun");
      }
    } else if (name == "repeats") {
      const auto repeats = node.value_exact<int64_t>();
      if (!repeats || *repeats < 1 || *repeats > 1000) {
        throw fail(node, "\"repeats\" must be a whole number from 1 to 1000");
      }
      config.repeats = static_cast<int>(*repeats);
    } else if (name == "store") {
      if (!node.is_string()) throw fail(node, "\"store\" must be a path");
      config.store_path = *node.value<std::string>();
    } else if (name == "gpus_per_node") {
      const auto per_node = node.value_exact<int64_t>();
      if (!node.is_integer() || !per_node || *per_node < 1 || *per_node > 4096) {
        throw fail(node, "\"gpus_per_node\" must be a whole number from 1 to 4096");
      }
      config.gpus_per_node = static_cast<int>(*per_node);
      gpus_per_node_at = position_of(node);
    } else if (name == "launcher_options") {
      launcher_options_at = position_of(node);
      if (const auto* array = node.as_array()) {
        for (const auto& element : *array) {
          if (!element.is_string()) throw fail(element, "\"launcher_options\" must be a string or an array of strings");
          config.launcher_options.push_back(*element.value<std::string>());
        }
      } else if (node.is_string()) {
        std::istringstream words(*node.value<std::string>());
        for (std::string word; words >> word;) config.launcher_options.push_back(word);
      } else {
        throw fail(node, "\"launcher_options\" must be a string or an array of strings");
      }
    } else if (name == "kill_grace_s") {
      const auto grace_s = node.value<double>();  // an integer too
      if (!grace_s || !(*grace_s >= 0 && *grace_s <= kMaxKillGraceS)) {
        throw fail(node, fmt::format("\"kill_grace_s\" must be a number of seconds from 0 to {:g}", kMaxKillGraceS));
      }
      config.kill_grace_s = *grace_s;
    } else if (name == "grid") {
      if (!node.is_table()) throw fail(node, "[grid] must be a table");
      for (const auto& [gkey, gnode] : *node.as_table()) {
        const std::string grid_key = unshift(gkey.str());
        std::vector<std::string> values;
        std::vector<SourcePosition> positions;
        if (const auto* array = gnode.as_array()) {
          for (const auto& element : *array) {
            values.push_back(value_text(element, path, grid_key));
            positions.push_back(position_of(element));
          }
        } else {
          values.push_back(value_text(gnode, path, grid_key));
          positions.push_back(position_of(gnode));
        }
        if (values.empty()) throw fail(gnode, fmt::format("grid.{}: no values", grid_key));
        config.grid.emplace_back(grid_key, values);
        config.grid_positions[grid_key] = std::move(positions);
      }
    } else {
      throw fail(node, fmt::format("unknown key \"{}\" (command, launcher, repeats, store, gpus_per_node, "
                                   "launcher_options, kill_grace_s, grid)",
                                   name));
    }
  }
  if (config.command.empty()) throw UsageError(fmt::format("{}: \"command\" is required", path));
  if (config.across_nodes() && config.launcher != "mpirun" && config.launcher != "srun") {
    throw fail_at(gpus_per_node_at,
                  fmt::format("\"gpus_per_node\" spreads runs across nodes, which needs launcher = \"mpirun\" or "
                              "\"srun\" (not \"{}\")",
                              config.launcher));
  }
  if (!config.launcher_options.empty() && config.launcher != "mpirun" && config.launcher != "srun") {
    throw fail_at(launcher_options_at, "\"launcher_options\" are for launcher = \"mpirun\" or \"srun\"");
  }
  // TOML tables iterate in key order; keep the order stable for users.
  for (const auto& [name, values] : config.grid) {
    // (Through a reference: clang before 16 cannot capture a structured binding.)
    const std::string& key = name;
    const auto value_at = [&](std::size_t i) { return config.grid_positions.at(key).at(i); };
    if (name == "gpus" || find_gpu_knob(name)) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        char* end = nullptr;
        const double x = std::strtod(values[i].c_str(), &end);
        if (*end != '\0' || !std::isfinite(x) || !(x > 0)) {
          throw fail_at(value_at(i), fmt::format("grid.{}: '{}' must be a positive number", name, values[i]));
        }
        if (name == "gpus" && (x != std::floor(x) || x > 1'000'000)) {
          throw fail_at(value_at(i), fmt::format("grid.gpus: '{}' must be a whole number of GPUs", values[i]));
        }
        // Watts and MHz far beyond any GPU: refused here whatever the devices
        // (the range of the GPUs themselves is checked when they are known).
        if (find_gpu_knob(name) && x > 100'000) {
          throw fail_at(value_at(i), fmt::format("grid.{}: '{}' is beyond any GPU's range", name, values[i]));
        }
      }
    }
    if (!config.across_nodes()) continue;
    if (find_gpu_knob(name)) {
      // The sweep changes GPU settings through this machine's driver (or its
      // jouled); the ranks of these runs run on the nodes the launcher picks.
      throw fail_at(value_at(0), fmt::format(
          "grid.{} cannot be swept with gpus_per_node: joule sweep changes GPU settings only on the machine it "
          "runs on, and these runs run on the nodes {} picks. Set it on every node before the sweep (nvidia-smi, "
          "or jouled), or sweep {} in runs on this machine (remove gpus_per_node)",
          name, config.launcher, name));
    }
    if (name != "gpus") continue;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const long g = std::strtol(values[i].c_str(), nullptr, 10);
      if (g > config.gpus_per_node && g % config.gpus_per_node != 0) {
        throw fail_at(value_at(i), fmt::format("grid.gpus: {} GPUs is not a whole number of nodes of gpus_per_node = {} "
                                               "(a run across nodes uses all of each node's {} GPUs)",
                                               g, config.gpus_per_node, config.gpus_per_node));
      }
    }
  }
  if (grid_run_count(config) > kMaxGridRuns) {
    throw UsageError(fmt::format("{}: the grid has more than {} runs (grid points x repeats); no sweep can run it",
                                 path, kMaxGridRuns));
  }
  if (config.store_path.empty()) {
    config.store_path = (std::filesystem::path(path).parent_path() / std::filesystem::path(path).stem()).string() + ".sqlite";
  } else if (std::filesystem::path(config.store_path).is_relative()) {
    config.store_path = (std::filesystem::path(path).parent_path() / config.store_path).string();
  }
  return config;
}

long long grid_run_count(const SweepConfig& config) {
  long long runs = config.repeats;
  for (const auto& [name, values] : config.grid) {
    runs *= static_cast<long long>(values.size());
    if (runs > kMaxGridRuns) return kMaxGridRuns + 1;  // no overflow, however many axes
  }
  return runs;
}

std::string SweepPoint::config_key() const { return nlohmann::json(values).dump(); }

std::vector<SweepPoint> expand_grid(const SweepConfig& config) {
  std::vector<std::map<std::string, std::string>> points = {{}};
  for (const auto& [name, values] : config.grid) {
    std::vector<std::map<std::string, std::string>> next;
    for (const auto& point : points) {
      for (const auto& value : values) {
        auto extended = point;
        extended[name] = value;
        next.push_back(std::move(extended));
      }
    }
    points = std::move(next);
  }
  std::vector<SweepPoint> runs;
  for (const auto& point : points) {
    for (int r = 0; r < config.repeats; ++r) runs.push_back({point, r});
  }
  return runs;
}

std::string fill_command(const SweepConfig& config, const SweepPoint& point) {
  std::string out;
  const std::string& t = config.command;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '{') {
      out += t[i];
      continue;
    }
    const auto close = t.find('}', i);
    if (close == std::string::npos) throw UsageError(fmt::format("{}: unclosed '{{' in the command", config.path));
    const std::string name = t.substr(i + 1, close - i - 1);
    if (name == "repeat") {
      out += std::to_string(point.repeat);
    } else if (auto it = point.values.find(name); it != point.values.end()) {
      out += it->second;
    } else {
      throw UsageError(fmt::format("{}: the command uses {{{}}}, which is not in [grid] (nor {{repeat}})", config.path, name));
    }
    i = close;
  }
  return out;
}

std::string run_command(const SweepConfig& config, const SweepPoint& point) {
  const std::string out = fill_command(config, point);
  const auto gpus = point.values.count("gpus") ? point.values.at("gpus") : "1";
  // --no-python: the command is a full command line ("python3 train.py ..."), not a script path.
  if (config.launcher == "torchrun") return fmt::format("torchrun --nproc-per-node {} --no-python {}", gpus, out);
  if (config.launcher == "mpirun") return fmt::format("mpirun -np {} {}", gpus, out);
  if (config.launcher == "srun") return fmt::format("srun --ntasks {} --gpus {} {}", gpus, gpus, out);
  return out;
}

NodeLayout node_layout(const SweepConfig& config, const SweepPoint& point) {
  NodeLayout layout;
  if (point.values.count("gpus")) layout.gpus = std::max(1, std::stoi(point.values.at("gpus")));  // checked at load
  const int per_node = std::max(1, config.gpus_per_node);
  layout.nodes = (layout.gpus + per_node - 1) / per_node;
  layout.ranks_per_node = std::min(layout.gpus, per_node);
  return layout;
}

}  // namespace joule
