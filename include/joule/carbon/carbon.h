// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Carbon and cost from measured energy: the bundled table of average grid
// carbon intensity (data/carbon/grid-intensity.csv, share/joule/carbon once
// installed), lookups in it by code or name, and footprints:
//   kWh = J / 3.6e6;  g CO2e = kWh x g/kWh x PUE;  cost = kWh x PUE x price.
// Depends on common only (a layering test checks).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace joule::carbon {

// One row of the table.
struct GridIntensity {
  std::string kind;          // "country", "us-state", "cloud"
  std::string code;          // "FRA", "US-CA", "gcp:europe-west1"
  std::string alpha2;        // countries: ISO 3166-1 alpha-2 ("FR"), also accepted by lookup; else empty
  std::string name;          // "France", "California", "Google Cloud Platform europe-west1 (...)"
  std::string country_iso3;  // the country it lies in
  double g_per_kwh = 0.0;    // average grid intensity, g CO2e/kWh
  int year = 0;
  std::string source;
};

class IntensityTable {
 public:
  // Reads a table; throws Error naming the file, line and column of a bad
  // row (intensity outside (0, 5000], no year or source, duplicate code).
  static IntensityTable read(const std::string& path);

  const std::vector<GridIntensity>& entries() const { return entries_; }
  const std::string& path() const { return path_; }

  // The row whose code or name is `key`, case-insensitively. Throws UsageError
  // starting with `flag` for an unknown key (listing close matches) or a name
  // that several rows share (listing their codes).
  const GridIntensity& lookup(const std::string& key, const std::string& flag = "--carbon-region") const;
  // The row with this code (or a country's alpha-2 code), or nullptr.
  const GridIntensity* find_code(const std::string& code) const;

 private:
  std::string path_;
  std::vector<GridIntensity> entries_;
};

// Where the bundled table is. Lookup order, first hit wins:
//   1. an explicit path (--carbon-table, $JOULE_CARBON_TABLE): it must exist;
//   2. $JOULE_DATA_DIR/carbon/grid-intensity.csv (when set, the only place looked after 1);
//   3. <a Python package's share/joule>/carbon/grid-intensity.csv (what pip installed);
//   4. <directory of the executable>/../share/joule/carbon/grid-intensity.csv;
//   5. the source tree's data/carbon/grid-intensity.csv (compiled in).
struct TableSearch {
  std::optional<std::string> explicit_path;
  std::optional<std::string> data_dir;  // $JOULE_DATA_DIR
  std::string package_share_dir;        // the joule Python package's share/joule, where it has one
  std::string executable_path;          // /proc/self/exe
  std::string source_data_dir;          // <source>/data

  // $JOULE_CARBON_TABLE as the explicit path, $JOULE_DATA_DIR, this process's executable.
  static TableSearch for_this_process();
};
// Throws Error naming every place looked.
std::string find_table(const TableSearch& search = TableSearch::for_this_process());

// What the user asked for. The field names go into error messages (flags for
// the CLI, keyword arguments for Python).
struct Settings {
  std::optional<std::string> region;     // a table code or name
  std::optional<double> g_per_kwh;       // or an intensity, g CO2e/kWh, [0, 5000]
  double pue = 1.0;                      // [1, 3]
  std::optional<double> price_per_kwh;   // >= 0, in `currency`
  std::string currency;                  // a label only
  std::optional<std::string> table_path; // overrides the bundled table

  struct Names {
    std::string region = "--carbon-region";
    std::string g_per_kwh = "--carbon-intensity";
    std::string pue = "--pue";
    std::string price = "--price";
    std::string currency = "--currency";
  } names;

  // True when any of region, g_per_kwh, price_per_kwh is given (else nothing to compute).
  bool any() const { return region || g_per_kwh || price_per_kwh; }
};

// The intensity and prices a footprint is computed with, resolved once.
struct Basis {
  std::optional<double> g_per_kwh;        // none: no carbon figure (price only)
  std::string region;                     // table code, empty when given as a number
  std::string region_name;
  std::string region_kind;                // "country", "us-state", "cloud", empty
  std::string country_iso3;
  std::string country_name;               // from the table's country row, where there is one
  std::string source;                     // "user-given" for a number
  std::optional<int> year;                // none for a number
  double pue = 1.0;
  std::optional<double> price_per_kwh;
  std::string currency;
};

// Validates every field (UsageError naming it) and looks the region up (in the
// table at settings.table_path, else the bundled one found by find_table()).
// Region and intensity together are refused.
Basis resolve(const Settings& settings, const TableSearch& search = TableSearch::for_this_process());

struct Footprint {
  double energy_kwh = 0.0;             // measured, before PUE
  std::optional<double> co2e_g;        // energy_kwh x PUE x g_per_kwh
  std::optional<double> cost;          // energy_kwh x PUE x price_per_kwh
};

// Throws UsageError for energy that is negative or not finite.
Footprint footprint(const Basis& basis, double energy_j);

constexpr double kJoulesPerKwh = 3.6e6;
// The largest grid intensity taken, g CO2e/kWh (coal alone is about 1000).
constexpr double kMaxGramsPerKwh = 5000.0;

}  // namespace joule::carbon
