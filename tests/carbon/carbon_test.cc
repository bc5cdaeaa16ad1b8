// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Carbon and cost: the bundled table, lookups, and footprints against hand-computed values.
#include "joule/carbon/carbon.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule::carbon {
namespace {

using testing::TempDir;

std::string source_table() { return std::string(JOULE_SOURCE_DIR) + "/data/carbon/grid-intensity.csv"; }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TableSearch source_search() {
  TableSearch search;
  search.source_data_dir = std::string(JOULE_SOURCE_DIR) + "/data";
  return search;
}

TEST(CarbonTableTest, TheBundledTableLoadsAndEveryEntryIsSaneWithAYearAndASource) {
  const IntensityTable table = IntensityTable::read(source_table());
  ASSERT_GT(table.entries().size(), 250u);
  int countries = 0, states = 0, cloud = 0;
  for (const auto& e : table.entries()) {
    EXPECT_TRUE(std::isfinite(e.g_per_kwh) && e.g_per_kwh > 0 && e.g_per_kwh < 2000) << e.code;
    EXPECT_GE(e.year, 2000) << e.code;
    EXPECT_LE(e.year, 2030) << e.code;
    EXPECT_FALSE(e.source.empty()) << e.code;
    EXPECT_FALSE(e.name.empty()) << e.code;
    EXPECT_EQ(e.country_iso3.size(), 3u) << e.code;
    EXPECT_EQ(e.alpha2.size(), e.kind == "country" ? 2u : 0u) << e.code;
    countries += e.kind == "country";
    states += e.kind == "us-state";
    cloud += e.kind == "cloud";
  }
  EXPECT_GT(countries, 200);
  EXPECT_EQ(states, 51);  // 50 states and DC
  EXPECT_GT(cloud, 30);
}

TEST(CarbonTableTest, LooksUpByCodeOrNameCaseInsensitively) {
  const IntensityTable table = IntensityTable::read(source_table());
  EXPECT_EQ(table.lookup("fra").name, "France");
  EXPECT_EQ(table.lookup("de").code, "DEU");  // ISO alpha-2, from Debian's iso-codes
  EXPECT_EQ(table.lookup("DEU").alpha2, "DE");
  EXPECT_EQ(table.lookup("US").code, "USA");
  EXPECT_EQ(table.lookup("FRANCE").code, "FRA");
  EXPECT_EQ(table.lookup("us-ca").name, "California");
  EXPECT_EQ(table.lookup("GCP:Europe-West1").kind, "cloud");
  // Georgia is a country and a US state: the name is ambiguous, the codes are not.
  const std::string ambiguous = message_of([&] { table.lookup("georgia"); });
  EXPECT_NE(ambiguous.find("GEO"), std::string::npos) << ambiguous;
  EXPECT_NE(ambiguous.find("US-GA"), std::string::npos) << ambiguous;
  EXPECT_EQ(table.lookup("GEO").kind, "country");
  EXPECT_THROW(table.lookup("georgia"), UsageError);
}

TEST(CarbonTableTest, AnUnknownRegionIsAUsageErrorListingCloseMatches) {
  const IntensityTable table = IntensityTable::read(source_table());
  EXPECT_THROW(table.lookup("Frnace"), UsageError);
  const std::string typo = message_of([&] { table.lookup("Frnace"); });
  EXPECT_NE(typo.find("--carbon-region 'Frnace'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("FRA (France)"), std::string::npos) << typo;
  const std::string cloud = message_of([&] { table.lookup("gcp:europe-west99", "region"); });
  EXPECT_EQ(cloud.rfind("region 'gcp:europe-west99'", 0), 0u) << cloud;
  EXPECT_NE(cloud.find("gcp:europe-west9"), std::string::npos) << cloud;
  const std::string nothing = message_of([&] { table.lookup("zzzzzzzzzzzzzzzzzz"); });
  EXPECT_NE(nothing.find("no close match"), std::string::npos) << nothing;
}

TEST(CarbonTableTest, ABadTableIsRefusedNamingItsLine) {
  TempDir tmp;
  const auto write = [&](const std::string& body) {
    std::ofstream(tmp.file("t.csv")) << "kind,code,name,country_iso3,g_per_kwh,year,source\n" << body;
    return tmp.file("t.csv");
  };
  EXPECT_NE(message_of([&] { IntensityTable::read(write("country,AAA,A,AAA,-3,2020,s\n")); }).find(":2:"),
            std::string::npos);
  EXPECT_NE(message_of([&] { IntensityTable::read(write("country,AAA,A,AAA,6000,2020,s\n")); }).find("g_per_kwh"),
            std::string::npos);
  EXPECT_NE(message_of([&] { IntensityTable::read(write("country,AAA,A,AAA,300,2020,\n")); }).find("no source"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              IntensityTable::read(write("country,AAA,A,AAA,300,2020,s\ncountry,aaa,B,AAA,200,2020,s\n"));
            }).find("twice"),
            std::string::npos);
  EXPECT_NE(message_of([&] { IntensityTable::read(write("country,AAA,A,AAA,300,,s\n")); }).find("year"),
            std::string::npos);
  // A table without the alpha2 column still loads (the column is optional).
  EXPECT_EQ(IntensityTable::read(write("country,AAA,A,AAA,300,2020,s\n")).lookup("aaa").alpha2, "");
}

TEST(CarbonTableTest, FindsTheTableExplicitlyInTheDataDirInstalledOrInTheSourceTree) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.file("share/joule/carbon"));
  std::filesystem::copy_file(source_table(), tmp.file("share/joule/carbon/grid-intensity.csv"));
  TableSearch installed;
  installed.executable_path = tmp.file("bin/joule");
  installed.source_data_dir = std::string(JOULE_SOURCE_DIR) + "/data";
  EXPECT_EQ(find_table(installed), tmp.file("share/joule/carbon/grid-intensity.csv"));
  EXPECT_EQ(find_table(source_search()), source_table());
  TableSearch data_dir = installed;
  data_dir.data_dir = tmp.file("share/joule");
  EXPECT_EQ(find_table(data_dir), tmp.file("share/joule/carbon/grid-intensity.csv"));
  data_dir.data_dir = tmp.file("nowhere");  // set: the only place looked
  EXPECT_THROW(find_table(data_dir), Error);
  TableSearch explicit_path = installed;
  explicit_path.explicit_path = tmp.file("missing.csv");
  EXPECT_THROW(find_table(explicit_path), UsageError);
  TableSearch none;
  none.executable_path = tmp.file("elsewhere/bin/joule");
  EXPECT_NE(message_of([&] { find_table(none); }).find("elsewhere/share/joule/carbon/grid-intensity.csv"),
            std::string::npos);
}

TEST(CarbonFootprintTest, MatchesHandComputedValuesFromARegion) {
  Settings settings;
  settings.region = "US-VT";  // eGRID 2016: 56.89 lb/MWh = 25.8 g/kWh (table, one decimal)
  settings.pue = 1.5;
  settings.price_per_kwh = 0.2;
  settings.currency = "USD";
  const Basis basis = resolve(settings, source_search());
  EXPECT_DOUBLE_EQ(*basis.g_per_kwh, 25.8);
  EXPECT_EQ(basis.region, "US-VT");
  EXPECT_EQ(basis.region_name, "Vermont");
  EXPECT_EQ(basis.country_iso3, "USA");
  EXPECT_EQ(basis.country_name, "United States");
  EXPECT_EQ(*basis.year, 2016);
  EXPECT_NE(basis.source.find("eGRID"), std::string::npos);
  // 7.2 MJ = 2 kWh; x 1.5 = 3 kWh at the meter; x 25.8 g = 77.4 g; x 0.2 = 0.6 USD.
  const Footprint f = footprint(basis, 7.2e6);
  EXPECT_DOUBLE_EQ(f.energy_kwh, 2.0);
  EXPECT_NEAR(*f.co2e_g, 77.4, 1e-9);
  EXPECT_NEAR(*f.cost, 0.6, 1e-12);
}

TEST(CarbonFootprintTest, MatchesHandComputedValuesFromAGivenIntensity) {
  Settings settings;
  settings.g_per_kwh = 400.0;
  const Basis basis = resolve(settings, source_search());
  EXPECT_EQ(basis.source, "user-given");
  EXPECT_FALSE(basis.year);
  EXPECT_TRUE(basis.region.empty());
  // 900 kJ = 0.25 kWh x 400 g = 100 g; no price, no cost.
  const Footprint f = footprint(basis, 900e3);
  EXPECT_DOUBLE_EQ(f.energy_kwh, 0.25);
  EXPECT_DOUBLE_EQ(*f.co2e_g, 100.0);
  EXPECT_FALSE(f.cost);
  EXPECT_DOUBLE_EQ(*footprint(basis, 0.0).co2e_g, 0.0);
  // Price alone: cost without carbon.
  Settings price_only;
  price_only.price_per_kwh = 0.3;
  price_only.pue = 1.2;
  const Footprint p = footprint(resolve(price_only, source_search()), 3.6e6);
  EXPECT_FALSE(p.co2e_g);
  EXPECT_NEAR(*p.cost, 0.36, 1e-12);
}

TEST(CarbonFootprintTest, EveryInputIsValidatedNamingItsFlag) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const auto error_of = [](const Settings& s) { return message_of([&] { resolve(s, source_search()); }); };
  const auto starts = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
  for (double pue : {0.9, 3.5, nan, inf}) {
    Settings s;
    s.pue = pue;
    EXPECT_TRUE(starts(error_of(s), "--pue:")) << error_of(s);
    EXPECT_THROW(resolve(s, source_search()), UsageError);
  }
  for (double g : {-1.0, 5001.0, nan, inf}) {
    Settings s;
    s.g_per_kwh = g;
    EXPECT_TRUE(starts(error_of(s), "--carbon-intensity:")) << error_of(s);
  }
  for (double price : {-0.01, nan, inf}) {
    Settings s;
    s.price_per_kwh = price;
    EXPECT_TRUE(starts(error_of(s), "--price:")) << error_of(s);
  }
  Settings both;
  both.region = "FRA";
  both.g_per_kwh = 50;
  EXPECT_NE(error_of(both).find("not both"), std::string::npos);
  Settings currency_alone;
  currency_alone.currency = "EUR";
  EXPECT_TRUE(starts(error_of(currency_alone), "--currency without --price"));
  Settings bad_currency;
  bad_currency.price_per_kwh = 1;
  bad_currency.currency = "E,R";
  EXPECT_TRUE(starts(error_of(bad_currency), "--currency:"));
  Settings python_names;
  python_names.names = {"region", "g_per_kwh", "pue", "price_per_kwh", "currency"};
  python_names.pue = 0.5;
  EXPECT_TRUE(starts(error_of(python_names), "pue:"));
  Settings boundaries;  // the ends of each range are accepted
  boundaries.pue = 3.0;
  boundaries.g_per_kwh = 5000.0;
  boundaries.price_per_kwh = 0.0;
  EXPECT_NO_THROW(resolve(boundaries, source_search()));
  Basis basis;
  basis.g_per_kwh = 100;
  for (double energy : {-1.0, nan, inf}) EXPECT_THROW(footprint(basis, energy), UsageError);
  Settings table;
  table.region = "FRA";
  table.table_path = "/nonexistent/table.csv";
  EXPECT_THROW(resolve(table, source_search()), UsageError);
}

}  // namespace
}  // namespace joule::carbon
