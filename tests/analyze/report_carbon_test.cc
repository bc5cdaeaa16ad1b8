// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule report` with carbon and cost: the configurations table's CO2e and
// cost per run against hand-computed values, in the library and end to end.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/test_support.h"
#include "joule/analyze/report.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/carbon/carbon.h"

namespace joule {
namespace {

using testing::TempDir;

SweepRun run(std::map<std::string, std::string> config, int repeat, double t, double e) {
  SweepRun r;
  r.config = std::move(config);
  r.repeat = repeat;
  r.status = "ok";
  r.elapsed_s = t;
  r.gpu_energy_j = e;
  return r;
}

std::vector<SweepRun> two_limits() {
  return {run({{"power_limit", "300"}}, 0, 99, 30000), run({{"power_limit", "300"}}, 1, 101, 30200),
          run({{"power_limit", "200"}}, 0, 110, 24000), run({{"power_limit", "200"}}, 1, 110, 24200)};
}

TEST(ReportCarbonTest, TheConfigurationsTableGivesCo2eAndCostPerRun) {
  const auto runs = two_limits();
  const SweepAnalysis a = analyze_sweep(runs);
  carbon::Basis basis;
  basis.g_per_kwh = 400.0;
  basis.source = "user-given";
  basis.pue = 1.5;
  basis.price_per_kwh = 0.2;
  basis.currency = "EUR";
  const std::string html = render_report("t", runs, a, {}, basis);
  EXPECT_NE(html.find("<th>CO2e per run</th><th>cost per run</th>"), std::string::npos);
  // power_limit=300: mean 30100 J = 0.0083611 kWh; x 1.5 x 400 g = 5.0167 g; x 1.5 x 0.2 EUR = 0.0025083 EUR.
  EXPECT_NE(html.find(">5.02 g</td>"), std::string::npos) << html;
  EXPECT_NE(html.find(">0.002508 EUR</td>"), std::string::npos);
  // power_limit=200: mean 24100 J = 0.0066944 kWh; x 1.5 x 400 g = 4.0167 g; x 0.3 = 0.0020083 EUR.
  EXPECT_NE(html.find(">4.02 g</td>"), std::string::npos);
  EXPECT_NE(html.find(">0.002008 EUR</td>"), std::string::npos);
  EXPECT_NE(html.find("the mean energy x PUE 1.5 x 400 g CO2e/kWh, the average grid intensity of the figure given"),
            std::string::npos);
  EXPECT_NE(html.find("Cost per run: the mean energy x PUE 1.5 x 0.2 EUR per kWh."), std::string::npos);
  // Without a basis the table is as before.
  const std::string plain = render_report("t", runs, a, {});
  EXPECT_EQ(plain.find("CO2e"), std::string::npos);
  EXPECT_EQ(plain.find("cost per run"), std::string::npos);
}

TEST(ReportCarbonTest, JouleReportTakesTheCarbonFlags) {
  TempDir tmp;
  testing::write_file(tmp.file("s.toml"), "command = \"sleep 0.05\"\n[grid]\npower_limit = [300, 400]\n");
  auto env = testing::simulated_only_env();
  env["JOULE_SIM"] = "count=1,load=1";
  const auto sweep = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, env);
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const auto report = testing::run_process({JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("r.html"),
                                            "--carbon-region", "SWE", "--pue", "1.1", "--price", "0.1",
                                            "--currency", "SEK"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = testing::read_file(tmp.file("r.html"));
  EXPECT_NE(html.find("<th>CO2e per run</th><th>cost per run</th>"), std::string::npos);
  EXPECT_NE(html.find("SWE (Sweden; Our World in Data"), std::string::npos) << html;
  EXPECT_NE(html.find("SEK</td>"), std::string::npos);
  // Each row's figure is its mean energy's footprint: check one against `joule analyze --json`.
  const auto analysis = nlohmann::json::parse(
      testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite"), "--json"}).out);
  carbon::Settings settings;
  settings.region = "SWE";
  settings.pue = 1.1;
  carbon::TableSearch search;
  search.source_data_dir = std::string(JOULE_SOURCE_DIR) + "/data";
  const carbon::Basis basis = carbon::resolve(settings, search);
  for (const auto& config : analysis["configs"]) {
    const double energy_j = config["energy_j_mean"];
    const double grams = energy_j / 3.6e6 * 1.1 * *basis.g_per_kwh;
    EXPECT_NE(html.find(fmt::format("<td data-sort=\"{}\">", grams)), std::string::npos) << grams;
  }
  const auto refused = testing::run_process({JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("x.html"),
                                             "--carbon-region", "Swden"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("SWE (Sweden)"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace joule
