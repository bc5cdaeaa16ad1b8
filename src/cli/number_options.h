// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Numbers on the command line. Every option that takes a number, and every
// number inside an option's text (--seeds 1..10, --drift-scale 64=2,
// --translate-with profiled:3, --gpus 0,2), is parsed here: decimal only, no
// wrap-around ("-5" is not a huge unsigned), finite (no nan, inf or 1e400),
// and within the option's range, before any command sees it. A bad value is a
// usage error (exit 2) naming the option, the value and the range.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace joule::cli {

// The templates below are defined for int, unsigned, std::size_t (uint64_t)
// and double.

// [min, max], or (min, max] where the lower end is excluded ("positive").
template <class T>
struct NumberRange {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
  bool min_excluded = false;
};

// Positive up to max: (0, max].
template <class T>
constexpr NumberRange<T> positive_up_to(T max) {
  return {T{0}, max, true};
}

// text as a T within range, or nullopt. Whole numbers: decimal digits, a '-'
// first for signed types only; others: decimal or exponent notation, finite.
template <class T>
std::optional<T> parse_number(std::string_view text, const NumberRange<T>& range);

// What parse_number expects, for messages and --help: "a whole number in
// [1, 100000000]", "a number in (0, 36500]".
template <class T>
std::string expected_number(const NumberRange<T>& range);

// Why text is not a number within range: "TEXT is outside [1, 3]" when it is
// a number, else "'TEXT' is not EXPECTED".
template <class T>
std::string bad_number_message(std::string_view text, const NumberRange<T>& range);

// parse_number, else UsageError with bad_number_message (what: "" or a
// prefix such as "batch size ").
template <class T>
T number_or_throw(std::string_view text, const NumberRange<T>& range, std::string_view what = "");

// An option taking one number within range. A bad value ends the parse with
// a CLI::ValidationError "NAME: " and bad_number_message; --help
// shows the range in the option's type ("FLOAT in (0, 36500]").
template <class T>
  requires std::is_arithmetic_v<T>
CLI::Option* add_number_option(CLI::App& app, const std::string& name, T& value, const NumberRange<T>& range,
                               const std::string& help);
template <class T>
CLI::Option* add_number_option(CLI::App& app, const std::string& name, std::optional<T>& value,
                               const NumberRange<T>& range, const std::string& help);

// An option whose text carries numbers, checked as it is parsed: `check`
// (one of the parsers below, or another that throws UsageError) runs on the
// text, and what it throws ends the parse as "NAME: MESSAGE".
CLI::Option* add_checked_text_option(CLI::App& app, const std::string& name, std::string& value,
                                     std::function<void(const std::string&)> check, const std::string& help);

// The parsers of option texts. Each throws UsageError with a message that
// does not name the option (the caller adds it).

// --seeds: "1..10" (at most 100001 seeds) or "1,4,9".
std::vector<uint64_t> parse_seeds(const std::string& text);

// --drift-scale: "F" (a factor for the optimal batch size before the drift)
// or "B=F,B=F" (per batch size).
struct DriftScale {
  std::optional<double> optimal_factor;
  std::map<int, double> by_batch_size;
};
DriftScale parse_drift_scale(const std::string& text);

// --translate-with: what is known of the target GPU: "trace", "profiled:N"
// (N batch sizes near the best) or "sizes:B1,B2" (those batch sizes).
struct KnownOfTarget {
  std::optional<int> profiled_points;  // profiled:N
  std::vector<int> profiled_sizes;     // sizes:B1,B2,...
  std::string text;                    // for the report: "" for trace
};
KnownOfTarget parse_translate_with(const std::string& text);

// --gpus: "0,2" -> {0, 2}, each an index up to kMaxGpuIndex; select_gpus()
// checks that they exist.
inline constexpr unsigned kMaxGpuIndex = 1023;
std::vector<unsigned> parse_gpu_indices(const std::string& text);

// Ranges shared by several options.
inline constexpr NumberRange<double> kEtaRange{0.0, 1.0};
inline constexpr NumberRange<int> kBatchSizeRange{1, 1'000'000};
inline constexpr NumberRange<uint64_t> kSeedRange{};  // any 64-bit seed, written in decimal

}  // namespace joule::cli
