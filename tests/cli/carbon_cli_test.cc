// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule measure` with carbon and cost flags and --emissions-csv: the real
// binary on simulated GPUs, figures checked against hand-computed ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <sstream>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

const std::map<std::string, std::string>& kSimEnv = testing::simulated_only_env();
constexpr double kPowerW = 70.0 + 0.5 * 580.0;  // the sim model at load 0.5
constexpr double kFranceGPerKwh = 56.0;         // data/carbon/grid-intensity.csv: FRA, OWID 2023

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

std::vector<std::map<std::string, std::string>> read_rows(const std::string& path) {
  std::istringstream in(testing::read_file(path));
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto fields = split(line);
    EXPECT_EQ(fields.size(), header.size()) << line;
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < fields.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

TEST(CarbonCliTest, MeasureReportsCarbonAndCostFromARegionInJson) {
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--sim", "count=2,load=0.5", "--carbon-region",
                              "france", "--pue", "1.2", "--price", "0.25", "--currency", "EUR", "--", "sleep", "0.3"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  const double total_j = report["total_energy_j"];
  const double elapsed_s = report["elapsed_s"];
  EXPECT_NEAR(total_j, 2 * kPowerW * elapsed_s, 0.02 * 2 * kPowerW * elapsed_s);
  const auto& c = report["carbon"];
  EXPECT_EQ(c["region"], "FRA");
  EXPECT_EQ(c["region_name"], "France");
  EXPECT_EQ(c["year"], 2023);
  EXPECT_NE(c["source"].get<std::string>().find("Our World in Data"), std::string::npos);
  EXPECT_DOUBLE_EQ(c["g_per_kwh"].get<double>(), kFranceGPerKwh);
  EXPECT_DOUBLE_EQ(c["pue"].get<double>(), 1.2);
  EXPECT_EQ(c["currency"], "EUR");
  // By hand from the reported total: kWh = J / 3.6e6; g = kWh x 1.2 x 56; EUR = kWh x 1.2 x 0.25.
  const double kwh = total_j / 3.6e6;
  EXPECT_NEAR(c["energy_kwh"].get<double>(), kwh, 1e-15);
  EXPECT_NEAR(c["co2e_g"].get<double>(), kwh * 1.2 * 56.0, 1e-12);
  EXPECT_NEAR(c["cost"].get<double>(), kwh * 1.2 * 0.25, 1e-12);
  // And from the model: 2 GPUs x 360 W x ~0.3 s = ~216 J = 6.0e-5 kWh -> ~4.0e-3 g.
  EXPECT_NEAR(c["co2e_g"].get<double>(), 2 * kPowerW * elapsed_s / 3.6e6 * 1.2 * 56.0, 0.02 * 4.0e-3);
}

TEST(CarbonCliTest, HumanReportShowsCarbonAndCostWithTheirBasis) {
  const auto r = run_process({JOULE_BINARY, "measure", "--sim", "count=1,load=0.5", "--carbon-intensity", "400",
                              "--price", "0.3", "--", "sleep", "0.2"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("joule: carbon: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("x PUE 1 x 400 g CO2e/kWh (average grid intensity: given with --carbon-intensity)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("joule: cost: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("x 0.3 per kWh"), std::string::npos) << r.err;
}

// A run of 0.2 s costs a millionth of a krona: written out, never in e-notation.
TEST(CarbonCliTest, TinyFiguresAreWrittenOut) {
  const auto r = run_process({JOULE_BINARY, "measure", "--sim", "count=1,load=0.5", "--carbon-intensity", "40",
                              "--price", "0.0001", "--currency", "SEK", "--", "sleep", "0.2"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("joule: cost: 0.0000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" SEK = 0.0000"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("e-0"), std::string::npos) << r.err;
}

TEST(CarbonCliTest, WithoutFlagsNothingChanges) {
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--sim", "count=1", "--", "true"}, kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("carbon"));
  const auto text = run_process({JOULE_BINARY, "measure", "--sim", "count=1", "--", "true"}, kSimEnv);
  EXPECT_EQ(text.err.find("carbon"), std::string::npos) << text.err;
}

TEST(CarbonCliTest, BadFlagsAreRefusedBeforeTheCommandRuns) {
  TempDir tmp;
  const std::string marker = tmp.file("ran");
  const auto refused = [&](std::vector<std::string> flags, const std::string& message) {
    std::vector<std::string> argv = {JOULE_BINARY, "measure"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const char* word : {"--", "touch"}) argv.push_back(word);
    argv.push_back(marker);
    const auto r = run_process(argv, kSimEnv);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  };
  refused({"--carbon-region", "Frnace"}, "--carbon-region 'Frnace': not in the carbon table");
  refused({"--carbon-region", "Frnace"}, "FRA (France)");
  refused({"--carbon-intensity", "6000"}, "--carbon-intensity: 6000 is outside [0, 5000]");
  refused({"--carbon-intensity", "100", "--pue", "0.8"}, "--pue: 0.8 is outside [1, 3]");
  refused({"--price", "-1"}, "--price: -1 is outside [0, 1000000]");
  refused({"--carbon-region", "FRA", "--carbon-intensity", "50"}, "not both");
  refused({"--pue", "1.5"}, "--pue, --currency and --carbon-table go with");
  refused({"--currency", "EUR", "--carbon-intensity", "100"}, "--currency without --price");
  testing::write_file(tmp.file("other.csv"), "a,b,c\n1,2,3\n");
  refused({"--emissions-csv", tmp.file("other.csv")}, "its header is not CodeCarbon's emissions.csv columns");
  EXPECT_EQ(testing::read_file(tmp.file("other.csv")), "a,b,c\n1,2,3\n");
}

TEST(CarbonCliTest, EmissionsCsvTakesOneRowPerRunInCodeCarbonsColumnsAndUnits) {
  TempDir tmp;
  const std::string csv = tmp.file("emissions.csv");
  for (int run = 0; run < 2; ++run) {
    const auto r = run_process({JOULE_BINARY, "measure", "--json", "--sim", "count=2,load=0.5", "--carbon-region",
                                "gcp:europe-west1", "--pue", "1.5", "--emissions-csv", csv, "--", "sleep", "0.2"},
                               kSimEnv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string text = testing::read_file(csv);
  // CodeCarbon 3.x EmissionsData's fields, in its order.
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,gpu_power,"
            "ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,water_consumed,country_name,country_iso_code,"
            "region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,"
            "gpu_model,longitude,latitude,ram_total_size,tracking_mode,cpu_utilization_percent,"
            "gpu_utilization_percent,ram_utilization_percent,ram_used_gb,on_cloud,pue,wue");
  const auto rows = read_rows(csv);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows[0].at("run_id"), rows[1].at("run_id"));
  for (const auto& row : rows) {
    const double duration_s = std::stod(row.at("duration"));
    EXPECT_GE(duration_s, 0.2);
    const double gpu_power_w = std::stod(row.at("gpu_power"));
    EXPECT_NEAR(gpu_power_w, 2 * kPowerW, 0.01 * 2 * kPowerW);
    // kWh with the PUE in them, as CodeCarbon counts them.
    const double gpu_kwh = std::stod(row.at("gpu_energy"));
    EXPECT_NEAR(gpu_kwh, gpu_power_w * duration_s / 3.6e6 * 1.5, 0.02 * gpu_kwh);
    EXPECT_DOUBLE_EQ(std::stod(row.at("energy_consumed")), gpu_kwh);  // no RAPL here: GPUs only
    // gcp:europe-west1 (Belgium): 122 g/kWh in the table; kg = kWh x 122 / 1000.
    EXPECT_NEAR(std::stod(row.at("emissions")), gpu_kwh * 122.0 / 1000.0, 1e-12);
    EXPECT_NEAR(std::stod(row.at("emissions_rate")), gpu_kwh * 122.0 / 1000.0 / duration_s, 1e-12);
    EXPECT_EQ(row.at("cpu_energy"), "");
    EXPECT_EQ(row.at("country_iso_code"), "BEL");
    EXPECT_EQ(row.at("country_name"), "Belgium");
    EXPECT_EQ(row.at("cloud_provider"), "gcp");
    EXPECT_EQ(row.at("cloud_region"), "europe-west1");
    EXPECT_EQ(row.at("on_cloud"), "Y");
    EXPECT_EQ(row.at("gpu_count"), "2");
    EXPECT_EQ(row.at("gpu_model"), "2 x Simulated GPU (H100-like)");
    EXPECT_EQ(row.at("pue"), "1.5");
    EXPECT_EQ(row.at("tracking_mode"), "machine");
    EXPECT_EQ(row.at("project_name"), "joule");
    EXPECT_EQ(row.at("codecarbon_version"), "");
    EXPECT_EQ(row.at("timestamp").size(), 19u);
  }
  // A US state fills the region as CodeCarbon does (lower-case name).
  const auto r = run_process({JOULE_BINARY, "measure", "--sim", "count=1", "--carbon-region", "US-CA",
                              "--emissions-csv", csv, "--", "true"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto more = read_rows(csv);
  ASSERT_EQ(more.size(), 3u);
  EXPECT_EQ(more[2].at("region"), "california");
  EXPECT_EQ(more[2].at("country_iso_code"), "USA");
  EXPECT_EQ(more[2].at("on_cloud"), "");
}

TEST(CarbonCliTest, EmissionsCsvRefusesAnUnfinishedFileAndAcceptsCodeCarbonsOwnInAnyOrder) {
  TempDir tmp;
  const std::string header =
      "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,gpu_power,"
      "ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,water_consumed,country_name,country_iso_code,"
      "region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,"
      "gpu_model,longitude,latitude,ram_total_size,tracking_mode,cpu_utilization_percent,"
      "gpu_utilization_percent,ram_utilization_percent,ram_used_gb,on_cloud,pue,wue";
  testing::write_file(tmp.file("cut.csv"), header + "\n2024-01-01T00:00:00,x");
  const auto cut = run_process({JOULE_BINARY, "measure", "--sim", "count=1", "--carbon-intensity", "100",
                                "--emissions-csv", tmp.file("cut.csv"), "--", "true"},
                               kSimEnv);
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_NE(cut.err.find("unfinished"), std::string::npos) << cut.err;
  // The same columns with pue first: the row follows the file's order.
  const std::string reordered = "pue," + header.substr(0, header.size() - std::string(",pue,wue").size()) + ",wue";
  testing::write_file(tmp.file("mine.csv"), reordered + "\n");
  const auto ok = run_process({JOULE_BINARY, "measure", "--sim", "count=1", "--carbon-intensity", "100", "--pue",
                               "2", "--emissions-csv", tmp.file("mine.csv"), "--", "true"},
                              kSimEnv);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto rows = read_rows(tmp.file("mine.csv"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("pue"), "2");
  EXPECT_EQ(rows[0].at("project_name"), "joule");
}

}  // namespace
}  // namespace joule
