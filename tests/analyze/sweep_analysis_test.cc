// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/sweep_analysis.h"

#include <gtest/gtest.h>

#include <regex>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>

#include "common/test_support.h"
#include "joule/analyze/report.h"
#include "joule/error.h"

namespace joule {
namespace {

SweepRun run(std::map<std::string, std::string> config, int repeat, double t, double e, std::string status = "ok") {
  SweepRun r;
  r.config = std::move(config);
  r.repeat = repeat;
  r.status = std::move(status);
  r.elapsed_s = t;
  r.gpu_energy_j = e;
  r.epochs = 2;
  r.samples = 3600;
  r.steps = 36;
  return r;
}

// Two GPU counts x two limits, two repeats each, numbers chosen by hand.
std::vector<SweepRun> hand_worked() {
  return {
      run({{"gpus", "1"}, {"power_limit", "300"}}, 0, 99, 30000), run({{"gpus", "1"}, {"power_limit", "300"}}, 1, 101, 30200),
      run({{"gpus", "1"}, {"power_limit", "200"}}, 0, 110, 24000), run({{"gpus", "1"}, {"power_limit", "200"}}, 1, 110, 24200),
      run({{"gpus", "2"}, {"power_limit", "300"}}, 0, 50, 31000), run({{"gpus", "2"}, {"power_limit", "300"}}, 1, 50, 31000),
      run({{"gpus", "2"}, {"power_limit", "200"}}, 0, 55, 25000), run({{"gpus", "2"}, {"power_limit", "200"}}, 1, 0, 0, "failed"),
  };
}

TEST(SweepAnalysisTest, StatisticsTradeOffsAndBestPerMetric) {
  const SweepAnalysis a = analyze_sweep(hand_worked());
  ASSERT_EQ(a.configs.size(), 4u);
  const auto& c = a.configs[1];  // gpus=1 power_limit=200
  EXPECT_EQ(c.label(), "gpus=1 power_limit=200");
  EXPECT_DOUBLE_EQ(c.time_s.mean, 110);
  EXPECT_DOUBLE_EQ(c.energy_j.mean, 24100);
  EXPECT_NEAR(c.energy_j.stddev, std::sqrt(20000.0), 1e-9);  // (100^2 + 100^2) / 1
  ASSERT_TRUE(c.trade_off);
  EXPECT_EQ(*c.baseline, 0u);  // same GPU count at 300 W
  EXPECT_NEAR(c.trade_off->energy_gain_percent, 100.0 * (30100.0 - 24100.0) / 30100.0, 1e-9);
  EXPECT_NEAR(c.trade_off->performance_loss_percent, 10.0, 1e-9);
  EXPECT_EQ(a.configs[3].failed, 1);
  EXPECT_EQ(a.configs[3].time_s.n, 1u);
  EXPECT_EQ(a.configs[a.best.at("time")].label(), "gpus=2 power_limit=300");
  EXPECT_EQ(a.configs[a.best.at("energy")].label(), "gpus=1 power_limit=200");
  // EDP: 99.99e3*... computed: 1/300: 100*30100, 1/200: 110*24100, 2/300: 50*31000, 2/200: 55*25000
  EXPECT_EQ(a.configs[a.best.at("edp")].label(), "gpus=2 power_limit=200");
  // 3600 samples in 110 s on 1 GPU: 3600 / (110 / 3600) samples per GPU-hour.
  EXPECT_NEAR(*c.samples_per_gpu_hour, 3600.0 / (110.0 / 3600.0), 1e-6);
  EXPECT_NEAR(*a.configs[2].updates_per_gpu_hour, 36.0 / (2 * 50.0 / 3600.0), 1e-6);
}

// A grid that sets no GPU setting (batch size x GPU count, as the shipped
// H200 example): every configuration is compared with the first one.
TEST(SweepAnalysisTest, WithoutAGpuSettingEveryConfigurationHasTheFirstAsBaseline) {
  const SweepAnalysis a = analyze_sweep({
      run({{"batch_size", "128"}, {"gpus", "1"}}, 0, 100, 30000), run({{"batch_size", "128"}, {"gpus", "2"}}, 0, 60, 34000),
      run({{"batch_size", "64"}, {"gpus", "1"}}, 0, 120, 33000), run({{"batch_size", "64"}, {"gpus", "2"}}, 0, 70, 36000),
  });
  ASSERT_EQ(a.configs.size(), 4u);
  for (std::size_t i = 0; i < a.configs.size(); ++i) {
    const auto& c = a.configs[i];
    ASSERT_TRUE(c.baseline) << c.label();
    EXPECT_EQ(a.configs[*c.baseline].label(), a.configs[0].label()) << c.label();
    ASSERT_TRUE(c.trade_off) << c.label();
  }
  const auto two_at = std::find_if(a.configs.begin(), a.configs.end(),
                                   [](const auto& c) { return c.label() == "batch_size=128 gpus=2"; });
  ASSERT_NE(two_at, a.configs.end());
  const auto& two = *two_at;
  EXPECT_NEAR(two.trade_off->performance_loss_percent, 100.0 * (60.0 - 100.0) / 100.0, 1e-9);  // faster: a negative loss
  EXPECT_NEAR(two.trade_off->energy_gain_percent, 100.0 * (30000.0 - 34000.0) / 30000.0, 1e-9);
}

// Clock caps are knobs like the power limit: the baseline has every knob at
// its largest value, whether the grid sets clocks alone or clocks and limits.
TEST(SweepAnalysisTest, ClockCapsAreKnobsWithTheLeastConstrainedRunAsBaseline) {
  const SweepAnalysis clocks = analyze_sweep({
      run({{"sm_clock_mhz", "1980"}}, 0, 100, 30000), run({{"sm_clock_mhz", "1410"}}, 0, 125, 24000),
      run({{"sm_clock_mhz", "990"}}, 0, 180, 26000),
  });
  for (const auto& c : clocks.configs) {
    ASSERT_TRUE(c.baseline);
    EXPECT_EQ(clocks.configs[*c.baseline].label(), "sm_clock_mhz=1980");
  }
  EXPECT_EQ(clocks.configs[clocks.best.at("energy")].label(), "sm_clock_mhz=1410");
  EXPECT_NEAR(clocks.configs[1].trade_off->energy_gain_percent, 20.0, 1e-9);
  EXPECT_NEAR(clocks.configs[1].trade_off->performance_loss_percent, 25.0, 1e-9);

  const SweepAnalysis both = analyze_sweep({
      run({{"power_limit", "300"}, {"sm_clock_mhz", "1980"}, {"batch", "8"}}, 0, 100, 30000),
      run({{"power_limit", "200"}, {"sm_clock_mhz", "1980"}, {"batch", "8"}}, 0, 110, 24000),
      run({{"power_limit", "300"}, {"sm_clock_mhz", "1410"}, {"batch", "8"}}, 0, 120, 25000),
      run({{"power_limit", "300"}, {"sm_clock_mhz", "1980"}, {"batch", "16"}}, 0, 60, 28000),
      run({{"power_limit", "200"}, {"sm_clock_mhz", "1410"}, {"batch", "16"}}, 0, 80, 22000),
  });
  for (const auto& c : both.configs) {
    ASSERT_TRUE(c.baseline) << c.label();
    const auto& base = both.configs[*c.baseline].config;
    EXPECT_EQ(base.at("power_limit"), "300") << c.label();
    EXPECT_EQ(base.at("sm_clock_mhz"), "1980") << c.label();
    EXPECT_EQ(base.at("batch"), c.config.at("batch")) << c.label();
  }
  EXPECT_DOUBLE_EQ(both.max_power_w, 300.0);  // time priced at the largest limit
  ASSERT_NE(find_gpu_knob("memory_clock_mhz"), nullptr);
  EXPECT_STREQ(find_gpu_knob("sm_clock_mhz")->unit, "MHz");
  EXPECT_EQ(find_gpu_knob("batch"), nullptr);
  // The report's charts name the knob and its unit.
  const std::vector<SweepRun> clock_runs = {run({{"sm_clock_mhz", "1980"}}, 0, 100, 30000),
                                            run({{"sm_clock_mhz", "1410"}}, 0, 125, 24000),
                                            run({{"sm_clock_mhz", "990"}}, 0, 180, 26000)};
  const std::string html = render_report("clocks", clock_runs, analyze_sweep(clock_runs), {});
  EXPECT_NE(html.find("SM clock cap per GPU"), std::string::npos);
  EXPECT_NE(html.find("every GPU knob (power limit, clock caps) at its largest value"), std::string::npos);
}

TEST(SweepAnalysisTest, ScalingFitsAndEnergyPerGpuHour) {
  const SweepAnalysis a = analyze_sweep(hand_worked());
  ASSERT_EQ(a.scaling.size(), 2u);
  // power_limit=300: time per epoch 49.5, 50.5 at N=1 and 25, 25 at N=2 -> b = log2(50/25) = 1 exactly at the means.
  const auto& fit300 = a.scaling[1];
  EXPECT_EQ(fit300.group, "power_limit=300");
  EXPECT_NEAR(fit300.fit.b, 1.0, 2e-4);
  EXPECT_NEAR(fit300.fit.a, 50.0, 0.01);
  ASSERT_TRUE(a.kwh_per_gpu_hour);
  EXPECT_EQ(a.kwh_per_gpu_hour->n, 7u);
}

TEST(SweepAnalysisTest, ParetoFrontAndEtaPicks) {
  const SweepAnalysis a = analyze_sweep(hand_worked(), 600.0);
  std::vector<std::string> front;
  for (std::size_t i : a.pareto) front.push_back(a.configs[i].label());
  // 2/300 is fastest; 2/200 (55 s, 25 kJ) beats 1/200 and 1/300... only 1/200 uses less energy (24.1 kJ).
  EXPECT_EQ(front, (std::vector<std::string>{"gpus=2 power_limit=300", "gpus=2 power_limit=200", "gpus=1 power_limit=200"}));
  EXPECT_EQ(a.configs[a.eta_picks.front().second].label(), "gpus=2 power_limit=300");  // eta 0: time
  EXPECT_EQ(a.configs[a.eta_picks.back().second].label(), "gpus=1 power_limit=200");   // eta 1: energy
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SweepAnalysisTest, ReportHoldsOneSvgPlotPerViewAndTheAnalysis) {
  auto runs = hand_worked();
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].id = static_cast<long long>(i + 1);
  const SweepAnalysis a = analyze_sweep(runs);
  const std::string html = render_report("test <report>", runs, a, {{1, 0.0, "gpu0", 250.0}, {1, 1.0, "gpu0", 260.0}});
  // time & energy vs limit, speed-up, energy and energy per GPU-hour vs GPUs, Pareto, one power timeline
  // Each drawn twice: for a desk and for a phone.
  EXPECT_EQ(count_of(html, "<svg class=\"plot desk\""), 7u);
  EXPECT_EQ(count_of(html, "<svg class=\"plot phone\""), 7u);
  EXPECT_NE(html.find("test &lt;report&gt;"), std::string::npos);
  EXPECT_NE(html.find("Pareto front"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // self-contained
  for (const char* fetch : {"src=\"http", "href=\"http", "url(http", "@import"}) EXPECT_EQ(html.find(fetch), std::string::npos);
}

TEST(SweepAnalysisTest, ReportSummarySaysWhatTheBestConfigurationsSave) {
  auto runs = hand_worked();
  const SweepAnalysis a = analyze_sweep(runs);
  const std::string html = render_report("t", runs, a, {});
  const std::string summary = html.substr(0, html.find("</section>"));
  // The first configuration at the largest limit: 100 s and 30.1 kJ per run.
  EXPECT_NE(summary.find("Baseline: <code>gpus=1 power_limit=300</code>"), std::string::npos) << summary;
  // Least energy: gpus=1 at 200 W, 24.1 kJ: 6 kJ (6000 / 3600 Wh, 6000 / 30100) less, 10 s (10%) more time.
  // Cost with max power 600 W: eta 0 and 0.25 pick the fastest, 0.5 and 0.75 the best EDP, 1 the least energy.
  EXPECT_NE(summary.find("<b>Least energy and cost at eta 1</b>: <code>gpus=1 power_limit=200</code>"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("6.00 kJ, 1.67 Wh (19.9%) less than the baseline"), std::string::npos) << summary;
  EXPECT_NE(summary.find("10.0 s (10%) more than the baseline"), std::string::npos) << summary;
  // Fastest: gpus=2 at 300 W, 50 s: 50 s (50%) less.
  EXPECT_NE(summary.find("<b>Fastest and cost at eta 0-0.25</b>: <code>gpus=2 power_limit=300</code>"),
            std::string::npos);
  EXPECT_NE(summary.find("50.0 s (50%) less than the baseline"), std::string::npos) << summary;
  EXPECT_NE(summary.find("<b>Best energy-delay product and cost at eta 0.5-0.75</b>: <code>gpus=2 power_limit=200</code>"),
            std::string::npos);
}

TEST(SweepAnalysisTest, ReportDrawsErrorBarsLabelsMarksAndLimitsAndNoExponents) {
  auto runs = hand_worked();
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].id = static_cast<long long>(i + 1);
  const SweepAnalysis a = analyze_sweep(runs);
  // Run 3 is gpus=1 at 200 W: its timeline carries the 200 W limit.
  const std::string html = render_report("t", runs, a, {{3, 0.0, "gpu0", 150.0}, {3, 2.0, "gpu0", 190.0}});
  const std::string page = html.substr(0, html.find("<details>"));  // the text analysis keeps its own format
  EXPECT_EQ(page.find("e+0"), std::string::npos);
  EXPECT_GE(count_of(page, "class=\"errorbar\""), 4u);
  // Pareto points labelled; the eta picks (all of this front) and the baseline ringed with their roles.
  // Each with its number in the configurations table (hand_worked's order).
  EXPECT_NE(page.find("class=\"mark-label\" data-anchor"), std::string::npos);
  auto mark = [&](const std::string& text) {
    return std::regex_search(page, std::regex("class=\"mark-label\"[^>]*>" + text + "<"));
  };
  EXPECT_TRUE(mark("#3 gpus=2 power_limit=300 \\(eta 0-0.25\\)")) << page;
  EXPECT_TRUE(mark("#1 gpus=1 power_limit=300 \\(baseline\\)"));
  EXPECT_TRUE(mark("#4 gpus=2 power_limit=200 \\(eta 0.5-0.75\\)"));
  EXPECT_NE(page.find("class=\"rule-label\" text-anchor=\"end\">limit 200 W<"), std::string::npos);
  EXPECT_NE(page.find("class=\"rule-label\" text-anchor=\"end\">baseline<"), std::string::npos);
  // configurations, scaling fits, scaling per GPU count, eta picks
  EXPECT_EQ(count_of(page, "<table class=\"sortable main\" id=\"configurations\">"), 1u);
  EXPECT_EQ(count_of(page, "<table class=\"sortable\">"), 3u);
  EXPECT_NE(page.find("<td data-sort=\"24100\">24.1 kJ \xC2\xB1 141 J</td>"), std::string::npos);
  EXPECT_NE(page.find("prefers-color-scheme: dark"), std::string::npos);
}

TEST(SweepAnalysisTest, ReportHasASectionPerNodeOnlyWhenRunsNameSeveral) {
  auto runs = hand_worked();
  const std::string one_node = render_report("t", runs, analyze_sweep(runs), {});
  EXPECT_EQ(one_node.find("<h2 class=\"node\">"), std::string::npos);
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].config["host"] = i % 2 ? "b" : "a";
  const std::string two_nodes = render_report("t", runs, analyze_sweep(runs), {});
  EXPECT_NE(two_nodes.find("<h2 class=\"node\">Node a</h2>"), std::string::npos);
  EXPECT_NE(two_nodes.find("<h2 class=\"node\">Node b</h2>"), std::string::npos);
  EXPECT_NE(two_nodes.find("<h2>a: Configurations</h2>"), std::string::npos);
}

// Issue 31: a configuration whose every run failed vanished ("failed 0",
// "N runs of 9 configurations" for 12). Each configuration and repeat now
// counts once, by its latest attempt (a success if any), every failed or
// interrupted one is listed with its error, and configurations without a
// successful run are kept apart, counted.
TEST(SweepAnalysisTest, EveryConfigurationAndRunIsCountedByItsLatestAttempt) {
  std::vector<SweepRun> runs = {
      run({{"a", "1"}}, 0, 10, 100), run({{"a", "1"}}, 1, 0, 0, "interrupted"),  // interrupted, then run again:
      run({{"a", "2"}}, 0, 0, 0, "failed"), run({{"a", "2"}}, 1, 0, 0, "failed"),
      run({{"a", "3"}}, 0, 12, 120), run({{"a", "3"}}, 1, 0, 0, "running"),
      run({{"a", "1"}}, 1, 11, 110),  // the second attempt of a=1 repeat 1 succeeded
  };
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].id = static_cast<long long>(i + 1);
  runs[2].exit_code = 3;
  runs[2].error = "the command exited with status 3";
  const SweepAnalysis a = analyze_sweep(runs);
  EXPECT_EQ(a.counts.configurations, 3);
  EXPECT_EQ(a.counts.configurations_failed, 1);
  EXPECT_EQ(a.counts.configurations_with_failures, 1);  // a=3: one run still 'running' (a killed sweep)
  EXPECT_EQ(a.counts.runs, 6);
  EXPECT_EQ(a.counts.ok, 3);
  EXPECT_EQ(a.counts.failed, 2);
  EXPECT_EQ(a.counts.interrupted, 1);
  EXPECT_EQ(a.counts.earlier_attempts, 1);
  ASSERT_EQ(a.configs.size(), 2u);
  EXPECT_EQ(a.configs[0].time_s.n, 2u);
  EXPECT_EQ(a.configs[0].failed, 0);  // its interrupted attempt was run again
  ASSERT_EQ(a.without_success.size(), 1u);
  EXPECT_EQ(a.without_success[0].label(), "a=2");
  EXPECT_EQ(a.without_success[0].failed, 2);
  ASSERT_EQ(a.failed_runs.size(), 3u);
  EXPECT_EQ(a.failed_runs[0].id, 3);
  EXPECT_EQ(a.failed_runs[2].status, "running");
  EXPECT_EQ(describe_counts(a.counts),
            "3 configurations, 1 failed (no successful run), 1 with failed runs; 6 runs: 3 ok, 2 failed, 1 interrupted "
            "(1 earlier attempt run again since, kept in the store)");
  const std::string text = to_text(a);
  EXPECT_NE(text.find("  run 3     a=2 repeat 0: failed (exit status 3): the command exited with status 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("a=3 repeat 1: running (a sweep under way, or one that was killed): no error recorded"),
            std::string::npos)
      << text;
  const nlohmann::json j = to_json(a);
  EXPECT_EQ(j["failed_runs"].size(), 3u);
  EXPECT_EQ(j["failed_runs"][0]["exit_code"], 3);
  EXPECT_TRUE(j["failed_runs"][1]["exit_code"].is_null());
  EXPECT_EQ(j["counts"]["configurations"], 3);
  const std::string html = render_report("t", runs, a, {});
  EXPECT_NE(html.find("3 configurations, 1 failed (no successful run), 1 with failed runs; 6 runs"), std::string::npos);
  EXPECT_NE(html.find("<li><code>a=2</code>: 2 failed</li>"), std::string::npos);
}

// A store whose numbers are impossible (damaged, or written by a faulty
// version): the run is read as failed, the value named, not averaged in.
TEST(SweepAnalysisTest, ImpossibleStoredNumbersMakeTheRunFailedNotUsed) {
  testing::TempDir tmp;
  const std::string path = tmp.file("s.sqlite");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db,
               "CREATE TABLE runs (id INTEGER PRIMARY KEY, sweep TEXT, config TEXT, repeat INTEGER, command TEXT,"
               " status TEXT, exit_code INTEGER, started_at REAL, finished_at REAL, elapsed_s REAL, gpu_energy_j REAL,"
               " cpu_energy_j REAL, dram_energy_j REAL, avg_power_w REAL, samples REAL, steps REAL, epochs REAL,"
               " gpu_util_mean REAL, gpu_util_cv REAL, mem_util_mean REAL, mem_util_cv REAL, error TEXT);"
               "INSERT INTO runs (config, repeat, status, exit_code, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j)"
               " VALUES ('{\"a\":\"1\"}', 0, 'ok', 0, 10, 100, 0, 0), ('{\"a\":\"1\"}', 1, 'ok', 0, 10, -5, 0, 0),"
               " ('{\"a\":\"2\"}', 0, 'ok', 0, 9e999, 100, 0, 0);",
               nullptr, nullptr, nullptr);
  sqlite3_close(db);
  const auto runs = load_sweep_runs(path);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, "ok");
  EXPECT_EQ(runs[1].status, "failed");
  EXPECT_NE(runs[1].error.find("holds gpu_energy_j = -5 for this run (stored as ok)"), std::string::npos) << runs[1].error;
  EXPECT_EQ(runs[2].status, "failed");
  EXPECT_NE(runs[2].error.find("elapsed_s = inf"), std::string::npos) << runs[2].error;
  const SweepAnalysis a = analyze_sweep(runs);
  EXPECT_DOUBLE_EQ(a.configs[0].energy_j.mean, 100);
  EXPECT_EQ(a.counts.failed, 2);
}

// A path with no store is a usage error (exit 2); a file that is not a
// readable store is a data error (Error, exit 1: issue 31 found exit 2).
TEST(SweepAnalysisTest, UnreadableStoreIsNamed) {
  EXPECT_THROW(load_sweep_runs("/nonexistent/s.sqlite"), UsageError);
  testing::TempDir tmp;
  testing::write_file(tmp.file("not.sqlite"), "hello");
  try {
    load_sweep_runs(tmp.file("not.sqlite"));
    FAIL();
  } catch (const UsageError& e) {
    FAIL() << "a usage error: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not.sqlite"), std::string::npos) << e.what();
  }
}

// Renders the page at a phone's and a desktop's width and checks what its
// script recorded: every chart drew marks and nothing sticks out.
void expect_every_chart_drew_and_nothing_overflows(const std::string& html_path, const testing::TempDir& tmp,
                                                   int charts) {
  for (const std::string width : {"390", "1400"}) {
    const std::string body = testing::chromium_body_tag(html_path, tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-width"), width) << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-plots"), std::to_string(charts)) << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), std::to_string(charts)) << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at width " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-label-problems"), "none") << "at width " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-colour-conflicts"), "none") << "at width " << width << ": " << body;
    EXPECT_GE(std::stod(testing::tag_attribute(body, "data-min-font-px")), 10.95) << "at width " << width << ": " << body;
  }
}

// The whole path as a user runs it: sweep on simulated GPUs, analyze, report,
// then headless Chromium renders the report and confirms every plot drew.
TEST(CharacterisationCliTest, SweepAnalyzeReportRenderInChromium) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("s.toml"),
                      "command = \"sleep 0.0{gpus}; echo epochs=1 >> $JOULE_REPORT_FILE\"\nrepeats = 2\n"
                      "[grid]\ngpus = [1, 2]\npower_limit = [300, 200]\n");
  const std::map<std::string, std::string> env = {{"JOULE_NVML_LIBRARY", "/nonexistent"},
                                                  {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
  ASSERT_EQ(testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=2,load=1"}, env).exit_code, 0);
  const auto analysis = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite"), "--json"});
  ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
  const auto j = nlohmann::json::parse(analysis.out);
  EXPECT_EQ(j["configs"].size(), 4u);
  EXPECT_EQ(j["scaling"].size(), 2u);
  const auto report = testing::run_process({JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  // Limit and GPU charts (5), the Pareto front, a power timeline per configuration (4).
  expect_every_chart_drew_and_nothing_overflows(tmp.file("r.html"), tmp, 10);
}

// The real 2x H200 sweep's store, as the committed example report is made.
TEST(CharacterisationCliTest, ExampleReportOfTheH200SweepRendersAtPhoneAndDesktopWidths) {
  testing::TempDir tmp;
  const auto report = testing::run_process({JOULE_BINARY, "report",
                                            std::string(JOULE_SOURCE_DIR) + "/docs/examples/ddp_sweep_h200.sqlite",
                                            "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  // Time & energy vs batch size, speed-up, energy and energy per GPU-hour vs GPUs, the Pareto front, four power
  // timelines.
  expect_every_chart_drew_and_nothing_overflows(tmp.file("r.html"), tmp, 10);
}

}  // namespace
}  // namespace joule

namespace joule {
namespace {

// When GPU count is the only setting, the scaling group and the report's plot
// group must carry the same name, or the fitted line is not drawn.
TEST(SweepAnalysisTest, FitLineIsDrawnWhenGpuCountIsTheOnlySetting) {
  std::vector<SweepRun> runs;
  for (int g : {1, 2, 4}) {
    SweepRun r;
    r.id = g;
    r.config = {{"gpus", std::to_string(g)}};
    r.status = "ok";
    r.elapsed_s = 100.0 / g;
    r.gpu_energy_j = 1000;
    runs.push_back(r);
  }
  const SweepAnalysis a = analyze_sweep(runs);
  ASSERT_EQ(a.scaling.size(), 1u);
  EXPECT_EQ(a.scaling[0].group, "all");
  EXPECT_NE(render_report("t", runs, a, {}).find("all fit"), std::string::npos);
}

}  // namespace
}  // namespace joule
