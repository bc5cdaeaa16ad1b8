// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/number_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule::cli {

namespace {

template <class T>
bool within(T value, const NumberRange<T>& range) {
  return (range.min_excluded ? value > range.min : value >= range.min) && value <= range.max;
}

template <class T>
std::string range_text(const NumberRange<T>& range) {
  return fmt::format("{}{}, {}]", range.min_excluded ? '(' : '[', range.min, range.max);
}

// The option's type in --help: CLI11's names, with the range unless it is
// the type's own (a seed: any 64-bit number).
template <class T>
std::string type_name(const NumberRange<T>& range) {
  const char* kind = std::is_floating_point_v<T> ? "FLOAT" : std::is_unsigned_v<T> ? "UINT" : "INT";
  const NumberRange<T> whole_type{};
  if (range.min == whole_type.min && range.max == whole_type.max) return kind;
  return fmt::format("{} in {}", kind, range_text(range));
}

// The text each option keeps: one number, parsed and checked when CLI11
// hands it over. Throwing CLI::ValidationError makes it a usage error.
template <class T, class Target>
CLI::Option* add_ranged(CLI::App& app, const std::string& name, Target& target, const NumberRange<T>& range,
                        const std::string& help) {
  CLI::Option* option = app.add_option_function<std::string>(
      name,
      [&target, name, range](const std::string& text) {
        const std::optional<T> value = parse_number(text, range);
        if (!value) {
          throw CLI::ValidationError(fmt::format("{}: {}", name, bad_number_message(text, range)));
        }
        target = *value;
      },
      help);
  option->type_name(type_name(range));
  return option;
}

}  // namespace

template <class T>
std::optional<T> parse_number(std::string_view text, const NumberRange<T>& range) {
  T value{};
  const char* end = text.data() + text.size();
  std::from_chars_result parsed{};
  if constexpr (std::is_floating_point_v<T>) {
    parsed = std::from_chars(text.data(), end, value, std::chars_format::general);
    if (parsed.ec == std::errc() && !std::isfinite(value)) return std::nullopt;  // "inf", "nan"
  } else {
    parsed = std::from_chars(text.data(), end, value, 10);  // no sign for unsigned types: "-5" fails
  }
  if (text.empty() || parsed.ec != std::errc() || parsed.ptr != end || !within(value, range)) return std::nullopt;
  return value;
}

template <class T>
std::string expected_number(const NumberRange<T>& range) {
  return fmt::format("{} in {}", std::is_floating_point_v<T> ? "a number" : "a whole number", range_text(range));
}

template <class T>
std::string bad_number_message(std::string_view text, const NumberRange<T>& range) {
  if (parse_number(text, NumberRange<T>{})) return fmt::format("{} is outside {}", printable(text), range_text(range));
  return fmt::format("'{}' is not {}", printable(text), expected_number(range));
}

template <class T>
T number_or_throw(std::string_view text, const NumberRange<T>& range, std::string_view what) {
  if (const auto value = parse_number(text, range)) return *value;
  throw UsageError(fmt::format("{}{}", what, bad_number_message(text, range)));
}

template <class T>
  requires std::is_arithmetic_v<T>
CLI::Option* add_number_option(CLI::App& app, const std::string& name, T& value, const NumberRange<T>& range,
                               const std::string& help) {
  return add_ranged<T>(app, name, value, range, help);
}

template <class T>
CLI::Option* add_number_option(CLI::App& app, const std::string& name, std::optional<T>& value,
                               const NumberRange<T>& range, const std::string& help) {
  return add_ranged<T>(app, name, value, range, help);
}

CLI::Option* add_checked_text_option(CLI::App& app, const std::string& name, std::string& value,
                                     std::function<void(const std::string&)> check, const std::string& help) {
  return app.add_option_function<std::string>(
      name,
      [&value, name, check = std::move(check)](const std::string& text) {
        try {
          check(text);
        } catch (const UsageError& e) {
          throw CLI::ValidationError(fmt::format("{}: {}", name, e.what()));
        }
        value = text;
      },
      help);
}

std::vector<uint64_t> parse_seeds(const std::string& text) {
  constexpr uint64_t kMostSeeds = 100'000;  // a range's last minus first
  const auto seed = [](std::string_view s) { return number_or_throw(s, kSeedRange, "seed "); };
  std::vector<uint64_t> seeds;
  if (const auto dots = text.find(".."); dots != std::string::npos) {
    const uint64_t first = seed(std::string_view(text).substr(0, dots));
    const uint64_t last = seed(std::string_view(text).substr(dots + 2));
    if (first > last || last - first > kMostSeeds) {
      throw UsageError(fmt::format("bad range '{}' (FIRST..LAST, at most {} apart)", printable(text), kMostSeeds));
    }
    for (uint64_t s = first; s <= last; ++s) seeds.push_back(s);
  } else {
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) seeds.push_back(seed(item));
  }
  if (seeds.empty()) throw UsageError("no seed given (expected e.g. 1..10 or 1,4,9)");
  return seeds;
}

DriftScale parse_drift_scale(const std::string& text) {
  // A factor of epochs to the target: past 1000 no run would reach it.
  constexpr NumberRange<double> kFactor = positive_up_to(1000.0);
  if (text.find('=') == std::string::npos) return {number_or_throw(text, kFactor, "factor "), {}};
  DriftScale scale;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw UsageError(fmt::format("'{}' is not B=F (a batch size and a factor; expected F or B=F,B=F)",
                                   printable(item)));
    }
    const int batch_size = number_or_throw(std::string_view(item).substr(0, eq), kBatchSizeRange, "batch size ");
    scale.by_batch_size[batch_size] = number_or_throw(std::string_view(item).substr(eq + 1), kFactor, "factor ");
  }
  return scale;
}

KnownOfTarget parse_translate_with(const std::string& text) {
  constexpr NumberRange<int> kProfiledPoints{1, 1000};
  if (text == "trace") return {std::nullopt, {}, ""};
  if (text.starts_with("profiled:")) {
    const int n = number_or_throw(std::string_view(text).substr(9), kProfiledPoints, "profiled:");
    return {n, {}, fmt::format("{} profiled batch sizes", n)};
  }
  if (text.starts_with("sizes:")) {
    KnownOfTarget known{std::nullopt, {}, ""};
    std::stringstream items(text.substr(6));
    for (std::string item; std::getline(items, item, ',');) {
      known.profiled_sizes.push_back(number_or_throw(item, kBatchSizeRange, "batch size "));
    }
    if (known.profiled_sizes.empty()) throw UsageError("sizes: lists no batch size (expected sizes:B1,B2,...)");
    known.text = fmt::format("profiled batch sizes {}", fmt::join(known.profiled_sizes, ","));
    return known;
  }
  throw UsageError(
      fmt::format("'{}' is not trace, profiled:N (N batch sizes near the best) or sizes:B1,B2,... (batch sizes)",
                  printable(text)));
}

std::vector<unsigned> parse_gpu_indices(const std::string& text) {
  constexpr NumberRange<unsigned> kGpuIndex{0, kMaxGpuIndex};
  std::vector<unsigned> indices;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    indices.push_back(number_or_throw(item, kGpuIndex, "GPU index "));
  }
  if (indices.empty()) throw UsageError("empty list (expected indices such as 0,2)");
  return indices;
}

#define JOULE_NUMBER_OPTION_TYPE(T)                                                                                  \
  template std::optional<T> parse_number(std::string_view, const NumberRange<T>&);                                \
  template std::string expected_number(const NumberRange<T>&);                                                     \
  template std::string bad_number_message(std::string_view, const NumberRange<T>&);                                \
  template T number_or_throw(std::string_view, const NumberRange<T>&, std::string_view);                           \
  template CLI::Option* add_number_option(CLI::App&, const std::string&, T&, const NumberRange<T>&,                \
                                          const std::string&);                                                     \
  template CLI::Option* add_number_option(CLI::App&, const std::string&, std::optional<T>&, const NumberRange<T>&, \
                                          const std::string&);
JOULE_NUMBER_OPTION_TYPE(int)
JOULE_NUMBER_OPTION_TYPE(unsigned)
JOULE_NUMBER_OPTION_TYPE(unsigned long)
JOULE_NUMBER_OPTION_TYPE(double)
#undef JOULE_NUMBER_OPTION_TYPE

}  // namespace joule::cli
