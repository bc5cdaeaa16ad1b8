// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/carbon/carbon.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <unordered_set>

#include "joule/common/csv.h"
#include "joule/error.h"

#ifndef JOULE_SOURCE_DATA_DIR
#define JOULE_SOURCE_DATA_DIR ""
#endif

namespace joule::carbon {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTableFile = "carbon/grid-intensity.csv";
constexpr double kMaxIntensity = kMaxGramsPerKwh;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void check_finite(double value, const std::string& name) {
  if (!std::isfinite(value)) throw UsageError(fmt::format("{}: {} is not a finite number", name, value));
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

IntensityTable IntensityTable::read(const std::string& path) {
  const CsvTable csv = CsvTable::read(path);
  csv.require_columns({"kind", "code", "name", "country_iso3", "g_per_kwh", "year", "source"});
  IntensityTable table;
  table.path_ = path;
  std::unordered_set<std::string> codes;
  for (std::size_t i = 0; i < csv.size(); ++i) {
    const auto row = csv.row(i);
    GridIntensity entry;
    entry.kind = row.text("kind");
    entry.code = row.text("code");
    if (csv.has_column("alpha2")) entry.alpha2 = row.text("alpha2");
    entry.name = row.text("name");
    entry.country_iso3 = row.text("country_iso3");
    entry.g_per_kwh = row.number("g_per_kwh");
    entry.source = row.text("source");
    const long long year = row.integer("year");
    if (entry.code.empty()) throw Error(csv.where(row.line, "code") + ": empty");
    if (!(entry.g_per_kwh > 0 && entry.g_per_kwh <= kMaxIntensity)) {
      throw Error(fmt::format("{}: {} g/kWh is outside (0, {}]", csv.where(row.line, "g_per_kwh"), entry.g_per_kwh,
                              kMaxIntensity));
    }
    if (year < 1990 || year > 2100) throw Error(fmt::format("{}: year {} is not plausible", csv.where(row.line, "year"), year));
    entry.year = static_cast<int>(year);
    if (entry.source.empty()) throw Error(csv.where(row.line, "source") + ": no source");
    if (!codes.insert(lower(entry.code)).second) {
      throw Error(fmt::format("{}: code '{}' appears twice", csv.where(row.line, "code"), entry.code));
    }
    if (!entry.alpha2.empty() && !codes.insert(lower(entry.alpha2)).second) {
      throw Error(fmt::format("{}: code '{}' appears twice", csv.where(row.line, "alpha2"), entry.alpha2));
    }
    table.entries_.push_back(std::move(entry));
  }
  return table;
}

const GridIntensity* IntensityTable::find_code(const std::string& code) const {
  const std::string key = lower(code);
  for (const auto& entry : entries_) {
    if (lower(entry.code) == key || (!entry.alpha2.empty() && lower(entry.alpha2) == key)) return &entry;
  }
  return nullptr;
}

const GridIntensity& IntensityTable::lookup(const std::string& key, const std::string& flag) const {
  if (const GridIntensity* hit = find_code(key)) return *hit;
  const std::string wanted = lower(key);
  std::vector<const GridIntensity*> named;
  for (const auto& entry : entries_) {
    if (lower(entry.name) == wanted) named.push_back(&entry);
  }
  if (named.size() == 1) return *named.front();
  if (named.size() > 1) {
    std::vector<std::string> which;
    for (const auto* entry : named) which.push_back(fmt::format("{} ({}, {})", entry->code, entry->name, entry->kind));
    throw UsageError(fmt::format("{} '{}': several regions have that name; give the code: {}", flag, key,
                                 fmt::join(which, ", ")));
  }
  // Close matches: a small edit distance to a code or name, or the key inside a name.
  std::vector<std::pair<std::size_t, const GridIntensity*>> close;
  for (const auto& entry : entries_) {
    const std::string code = lower(entry.code), name = lower(entry.name);
    std::size_t distance = std::min(edit_distance(wanted, code), edit_distance(wanted, name));
    if (wanted.size() >= 3 && name.find(wanted) != std::string::npos) distance = std::min<std::size_t>(distance, 1);
    const std::size_t allowed = wanted.size() <= 3 ? 1 : (wanted.size() <= 6 ? 2 : 3);
    if (distance <= allowed) close.emplace_back(distance, &entry);
  }
  std::stable_sort(close.begin(), close.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (close.size() > 8) close.resize(8);
  std::vector<std::string> names;
  for (const auto& [distance, entry] : close) names.push_back(fmt::format("{} ({})", entry->code, entry->name));
  const std::string hint = names.empty() ? "no close match" : fmt::format("close: {}", fmt::join(names, ", "));
  throw UsageError(fmt::format(
      "{} '{}': not in the carbon table {} ({}; codes are ISO 3166 alpha-3 or alpha-2 such as FRA or FR, US-CA for US states, "
      "gcp:europe-west1 for cloud regions, as listed in that file; or give the intensity itself)",
      flag, key, path_, hint));
}

TableSearch TableSearch::for_this_process() {
  TableSearch search;
  if (const char* env = std::getenv("JOULE_CARBON_TABLE"); env && *env) search.explicit_path = env;
  if (const char* env = std::getenv("JOULE_DATA_DIR"); env && *env) search.data_dir = env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) search.executable_path = exe.string();
  search.source_data_dir = JOULE_SOURCE_DATA_DIR;
  return search;
}

std::string find_table(const TableSearch& search) {
  if (search.explicit_path) {
    if (is_file(*search.explicit_path)) return *search.explicit_path;
    throw UsageError(fmt::format("carbon table {}: no such file", *search.explicit_path));
  }
  if (search.data_dir) {
    const fs::path path = fs::path(*search.data_dir) / kTableFile;
    if (is_file(path)) return path.string();
    throw Error(fmt::format("JOULE_DATA_DIR={}: no {} there", *search.data_dir, kTableFile));
  }
  std::vector<fs::path> candidates;
  if (!search.package_share_dir.empty()) candidates.push_back(fs::path(search.package_share_dir) / kTableFile);
  if (!search.executable_path.empty()) {
    candidates.push_back(fs::path(search.executable_path).parent_path().parent_path() / "share" / "joule" / kTableFile);
  }
  if (!search.source_data_dir.empty()) candidates.push_back(fs::path(search.source_data_dir) / kTableFile);
  std::vector<std::string> looked;
  for (const auto& path : candidates) {
    if (is_file(path)) return path.string();
    looked.push_back(path.string());
  }
  throw Error(fmt::format("the carbon table was not found (looked at: {}); set JOULE_DATA_DIR or give its path",
                          looked.empty() ? std::string("nowhere") : fmt::format("{}", fmt::join(looked, ", "))));
}

Basis resolve(const Settings& settings, const TableSearch& search) {
  const auto& names = settings.names;
  Basis basis;
  check_finite(settings.pue, names.pue);
  if (settings.pue < 1.0 || settings.pue > 3.0) {
    throw UsageError(fmt::format("{}: {} is outside [1, 3] (power usage effectiveness: facility energy over IT energy)",
                                 names.pue, settings.pue));
  }
  basis.pue = settings.pue;
  if (settings.price_per_kwh) {
    check_finite(*settings.price_per_kwh, names.price);
    if (*settings.price_per_kwh < 0) {
      throw UsageError(fmt::format("{}: {} is negative (a price per kWh)", names.price, *settings.price_per_kwh));
    }
    basis.price_per_kwh = settings.price_per_kwh;
  }
  if (settings.currency.size() > 16 ||
      std::any_of(settings.currency.begin(), settings.currency.end(),
                  [](unsigned char c) { return c < 0x20 || c == ',' || c == '"'; })) {
    throw UsageError(fmt::format("{}: '{}' is not a currency label (up to 16 characters, no commas or quotes)",
                                 names.currency, settings.currency));
  }
  basis.currency = settings.currency;
  if (!settings.currency.empty() && !settings.price_per_kwh) {
    throw UsageError(fmt::format("{} without {}: give the price per kWh", names.currency, names.price));
  }
  if (settings.region && settings.g_per_kwh) {
    throw UsageError(fmt::format("give {} or {}, not both", names.region, names.g_per_kwh));
  }
  if (settings.g_per_kwh) {
    check_finite(*settings.g_per_kwh, names.g_per_kwh);
    if (*settings.g_per_kwh < 0 || *settings.g_per_kwh > kMaxIntensity) {
      throw UsageError(fmt::format("{}: {} g CO2e/kWh is outside [0, {}]", names.g_per_kwh, *settings.g_per_kwh,
                                   kMaxIntensity));
    }
    basis.g_per_kwh = settings.g_per_kwh;
    basis.source = "user-given";
  } else if (settings.region) {
    if (settings.region->empty()) throw UsageError(fmt::format("{}: empty (give a code such as FRA)", names.region));
    std::string path;
    if (settings.table_path) {
      TableSearch explicit_search;
      explicit_search.explicit_path = settings.table_path;
      path = find_table(explicit_search);
    } else {
      path = find_table(search);
    }
    const IntensityTable table = IntensityTable::read(path);
    const GridIntensity& row = table.lookup(*settings.region, names.region);
    basis.g_per_kwh = row.g_per_kwh;
    basis.region = row.code;
    basis.region_name = row.name;
    basis.region_kind = row.kind;
    basis.country_iso3 = row.country_iso3;
    if (const GridIntensity* country = table.find_code(row.country_iso3); country && country->kind == "country") {
      basis.country_name = country->name;
    }
    basis.source = row.source;
    basis.year = row.year;
  }
  return basis;
}

Footprint footprint(const Basis& basis, double energy_j) {
  if (!std::isfinite(energy_j) || energy_j < 0) {
    throw UsageError(fmt::format("energy_j: {} is not a finite, non-negative energy", energy_j));
  }
  Footprint f;
  f.energy_kwh = energy_j / kJoulesPerKwh;
  if (basis.g_per_kwh) f.co2e_g = f.energy_kwh * basis.pue * *basis.g_per_kwh;
  if (basis.price_per_kwh) f.cost = f.energy_kwh * basis.pue * *basis.price_per_kwh;
  return f;
}

}  // namespace joule::carbon
