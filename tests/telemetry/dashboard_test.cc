// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The Grafana dashboard (packaging/grafana/joule-dashboard.json) against what
// `joule exporter` serves: the JSON is a dashboard, every panel queries the
// chosen Prometheus, and every series its PromQL names is a family the
// exporter renders, so a renamed series breaks this test, not the dashboard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/test_support.h"
#include "joule/device/sim.h"
#include "joule/telemetry/energy_exporter.h"

namespace joule {
namespace {

using nlohmann::json;

// One series selector in a PromQL expression: the metric name and the text
// of its label matchers ("" without braces).
struct Selector {
  std::string metric;
  std::string matchers;
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool ident_char(char c) { return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

// The index just past the string literal opening at s[i] ("...", '...' with
// backslash escapes, `...` raw).
std::size_t skip_string(std::string_view s, std::size_t i) {
  const char quote = s[i++];
  while (i < s.size() && s[i] != quote) i += (quote != '`' && s[i] == '\\') ? 2 : 1;
  return std::min(i + 1, s.size());
}

// The index just past the bracket closing the one at s[i] (strings inside
// are skipped, so a `}` in a label value does not close a selector).
std::size_t skip_bracketed(std::string_view s, std::size_t i) {
  const char open = s[i], close = open == '(' ? ')' : open == '{' ? '}' : ']';
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(s, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return i;
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Every series selector in a PromQL expression, in order. A small scanner,
// not a parser: string literals, label matchers, [range] and [range:step]
// brackets, Grafana variables ($var, ${var}, ${var:fmt}), comments and
// numbers (3.6e6, 0x1f, 5m) are skipped, and so are the label lists of by,
// without, on, ignoring, group_left and group_right. What is left and is an
// identifier is a metric name, unless a "(" follows it (a function or an
// aggregation) or it is a keyword.
std::vector<Selector> promql_selectors(std::string_view expr) {
  static const std::set<std::string> grouping = {"by", "without", "on", "ignoring", "group_left", "group_right"};
  static const std::set<std::string> keywords = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"};
  std::vector<Selector> out;
  std::size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(expr, i);
    } else if (c == '{' || c == '[') {
      i = skip_bracketed(expr, i);  // a bare {__name__=...} or a range
    } else if (c == '$') {
      ++i;
      if (i < expr.size() && expr[i] == '{') {
        i = skip_bracketed(expr, i);
      } else {
        while (i < expr.size() && ident_char(expr[i])) ++i;
      }
    } else if (c == '#') {
      while (i < expr.size() && expr[i] != '\n') ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < expr.size() && std::isdigit(static_cast<unsigned char>(expr[i + 1])))) {
      const std::size_t start = i;
      while (i < expr.size()) {
        const char d = expr[i];
        const bool exponent_sign = (d == '+' || d == '-') && (expr[i - 1] == 'e' || expr[i - 1] == 'E') &&
                                   !(expr.substr(start, 2) == "0x" || expr.substr(start, 2) == "0X");
        if (!(std::isalnum(static_cast<unsigned char>(d)) || d == '.' || d == '_' || exponent_sign)) break;
        ++i;
      }
    } else if (ident_start(c)) {
      const std::size_t start = i;
      while (i < expr.size() && ident_char(expr[i])) ++i;
      const std::string word = lower(expr.substr(start, i - start));
      std::size_t next = skip_space(expr, i);
      if (grouping.count(word)) {
        if (next < expr.size() && expr[next] == '(') i = skip_bracketed(expr, next);
        continue;
      }
      if (keywords.count(word)) continue;
      // `sum by (job) (...)`: a grouping clause between an aggregation and its "(".
      for (std::size_t after = next; after < expr.size() && ident_start(expr[after]);) {
        std::size_t end = after;
        while (end < expr.size() && ident_char(expr[end])) ++end;
        const std::size_t open = skip_space(expr, end);
        if (!grouping.count(lower(expr.substr(after, end - after))) || open >= expr.size() || expr[open] != '(') break;
        next = after = skip_space(expr, skip_bracketed(expr, open));
      }
      if (next < expr.size() && expr[next] == '(') continue;  // a function or an aggregation
      Selector selector{std::string(expr.substr(start, i - start)), ""};
      if (next < expr.size() && expr[next] == '{') {
        i = skip_bracketed(expr, next);
        selector.matchers = std::string(expr.substr(next + 1, i - next - 2));
      }
      out.push_back(std::move(selector));
    } else {
      ++i;
    }
  }
  return out;
}

std::set<std::string> promql_metric_names(std::string_view expr) {
  std::set<std::string> names;
  for (const Selector& s : promql_selectors(expr)) names.insert(s.metric);
  return names;
}

// A query the dashboard sends to Prometheus, and where it is.
struct DashboardQuery {
  std::string where;  // "panel 'Power per GPU'" or "variable 'Hostname'"
  std::string expr;   // PromQL
  bool from_panel = true;
};

// The PromQL in a Grafana query variable's query: label_values(METRIC, label)
// -> METRIC (label_values(label) has none), query_result(EXPR) -> EXPR;
// label_names() and metrics(regex) name no series.
std::optional<std::string> variable_promql(const std::string& query) {
  const auto call = [&](const std::string& name) -> std::optional<std::string> {
    const std::size_t start = skip_space(query, 0);
    if (query.compare(start, name.size(), name) != 0) return std::nullopt;
    const std::size_t open = skip_space(query, start + name.size());
    if (open >= query.size() || query[open] != '(') return std::nullopt;
    const std::size_t close = skip_bracketed(query, open);
    return query.substr(open + 1, close - open - 2);
  };
  if (const auto args = call("label_values"); args) {
    // The last comma outside braces and strings separates the label.
    std::size_t comma = std::string::npos;
    for (std::size_t i = 0; i < args->size();) {
      const char c = (*args)[i];
      if (c == '"' || c == '\'' || c == '`') i = skip_string(*args, i);
      else if (c == '{' || c == '(' || c == '[') i = skip_bracketed(*args, i);
      else {
        if (c == ',') comma = i;
        ++i;
      }
    }
    if (comma == std::string::npos) return std::nullopt;
    return args->substr(0, comma);
  }
  if (const auto inner = call("query_result"); inner) return inner;
  if (call("label_names") || call("metrics")) return std::nullopt;
  return query;  // a plain expression
}

// Every PromQL query in the dashboard: its panels' (and nested rows' panels')
// targets, and its query variables.
std::vector<DashboardQuery> dashboard_queries(const json& dashboard) {
  std::vector<DashboardQuery> out;
  const auto add_panels = [&](const json& panels, const auto& self) -> void {
    for (const json& panel : panels) {
      const std::string where = "panel '" + panel.value("title", std::string("?")) + "'";
      for (const json& target : panel.value("targets", json::array())) {
        if (target.contains("expr") && target["expr"].is_string()) out.push_back({where, target["expr"].get<std::string>(), true});
      }
      if (panel.contains("panels")) self(panel["panels"], self);
    }
  };
  add_panels(dashboard.value("panels", json::array()), add_panels);
  for (const json& variable : dashboard.value("templating", json::object()).value("list", json::array())) {
    if (variable.value("type", std::string()) != "query") continue;
    const json& query = variable.value("query", json());
    const std::string text = query.is_string() ? query.get<std::string>()
                             : query.is_object() ? query.value("query", std::string())
                                                 : std::string();
    if (const auto promql = variable_promql(text); promql) {
      out.push_back({"variable '" + variable.value("name", std::string("?")) + "'", *promql, false});
    }
  }
  return out;
}

// One line per series the dashboard queries but `served` does not hold.
std::vector<std::string> unserved_series(const json& dashboard, const std::set<std::string>& served) {
  std::vector<std::string> problems;
  for (const DashboardQuery& q : dashboard_queries(dashboard)) {
    for (const std::string& metric : promql_metric_names(q.expr)) {
      if (!served.count(metric)) problems.push_back(q.where + " queries " + metric + ", which joule exporter does not serve: " + q.expr);
    }
  }
  return problems;
}

const std::string kDashboardPath = std::string(JOULE_SOURCE_DIR) + "/packaging/grafana/joule-dashboard.json";

json load_dashboard() {
  std::ifstream in(kDashboardPath);
  if (!in) {
    ADD_FAILURE() << "cannot open " << kDashboardPath;
    return json();
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    ADD_FAILURE() << kDashboardPath << " is not valid JSON: " << e.what();
    return json();
  }
}

// The families (`# TYPE` lines) an exporter on two simulated GPUs renders,
// jouled's included (it is told a socket, which does not exist).
std::set<std::string> exporter_families() {
  testing::TempDir dir;
  auto clock = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<Gpu>> gpus;
  for (unsigned i = 0; i < 2; ++i) gpus.push_back(std::make_shared<SimGpu>(i, SimGpuModel{}, clock));
  ExporterOptions options;
  options.hostname = "node7";
  options.proc_root = dir.file("proc");
  options.jouled_socket = dir.file("no-jouled.sock");
  options.sampler.background_thread = false;
  EnergyExporter exporter(gpus, {}, clock, options);
  exporter.start();
  for (int tick = 0; tick < 20; ++tick) {
    clock->advance_s(0.1);
    exporter.sampler().sample_now();
  }
  exporter.account_now();
  std::set<std::string> families;
  std::istringstream lines(exporter.metrics_text());
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string hash, type, name;
    if (words >> hash >> type >> name && hash == "#" && type == "TYPE") families.insert(name);
  }
  exporter.stop();
  return families;
}

TEST(DashboardPromqlTest, FindsTheMetricNamesInAnExpression) {
  using Names = std::set<std::string>;
  EXPECT_EQ(promql_metric_names(R"(sum by (joule_job) (rate(joule_job_gpu_energy_joules_total{Hostname=~"$Hostname"}[$__rate_interval])) / 3.6e6)"),
            Names{"joule_job_gpu_energy_joules_total"});
  EXPECT_EQ(promql_metric_names("joule_gpu_up == 0"), Names{"joule_gpu_up"});
  EXPECT_EQ(promql_metric_names(R"(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname"})"), Names{"DCGM_FI_DEV_POWER_USAGE"});
  // Grouping after the aggregation, matching and modifiers, keywords.
  EXPECT_EQ(promql_metric_names("sum(rate(a_total[5m:1m] offset 1h)) without (gpu, UUID) / on (Hostname) group_left (modelName) b"),
            (Names{"a_total", "b"}));
  EXPECT_EQ(promql_metric_names("sum(x) by (a) + topk without (b) (5, y) + count by(c)(z)"), (Names{"x", "y", "z"}));
  EXPECT_EQ(promql_metric_names("x > bool 1 and ignoring (job) y or z unless w"), (Names{"x", "y", "z", "w"}));
  EXPECT_EQ(promql_metric_names("x * group_right y"), (Names{"x", "y"}));
  // Strings, Grafana variables, numbers, the @ modifier and recording rules' names.
  EXPECT_EQ(promql_metric_names(R"q(count_values("by(x)", m{a="}{[", b='y'}) * $scale + ${f:csv} + 1e-3 + 0x1F @ start())q"),
            Names{"m"});
  EXPECT_EQ(promql_metric_names("node:power_watts:sum + Inf - NaN"), Names{"node:power_watts:sum"});
  EXPECT_EQ(promql_metric_names("vector(1) # not_a_metric"), Names{});
  // Matchers come back with their metric.
  const std::vector<Selector> selectors = promql_selectors(R"(x{a="1", b=~"$B"} / y)");
  ASSERT_EQ(selectors.size(), 2u);
  EXPECT_EQ(selectors[0].metric, "x");
  EXPECT_EQ(selectors[0].matchers, R"(a="1", b=~"$B")");
  EXPECT_EQ(selectors[1].matchers, "");
}

TEST(DashboardPromqlTest, FindsThePromqlInVariableQueries) {
  EXPECT_EQ(variable_promql("label_values(DCGM_FI_DEV_POWER_USAGE, Hostname)"), "DCGM_FI_DEV_POWER_USAGE");
  EXPECT_EQ(variable_promql(R"(label_values(joule_gpu_up{Hostname=~"$Hostname"}, gpu))"), R"(joule_gpu_up{Hostname=~"$Hostname"})");
  EXPECT_EQ(variable_promql("label_values(Hostname)"), std::nullopt);
  EXPECT_EQ(variable_promql("query_result(topk(5, joule_gpu_up))"), "topk(5, joule_gpu_up)");
  EXPECT_EQ(variable_promql("label_names()"), std::nullopt);
  EXPECT_EQ(variable_promql("metrics(joule_.*)"), std::nullopt);
}

TEST(DashboardTest, IsAGrafanaDashboardOnTheChosenPrometheus) {
  const json dashboard = load_dashboard();
  ASSERT_TRUE(dashboard.is_object()) << kDashboardPath;
  EXPECT_EQ(dashboard.value("title", std::string()), "joule: GPU energy by job");
  EXPECT_EQ(dashboard.value("uid", std::string()), "joule-energy");
  EXPECT_EQ(dashboard.value("schemaVersion", 0), 39);

  bool datasource_variable = false;
  for (const json& variable : dashboard.at("templating").at("list")) {
    if (variable.value("name", std::string()) == "datasource") {
      datasource_variable = variable.value("type", std::string()) == "datasource" &&
                            variable.value("query", std::string()) == "prometheus";
    }
  }
  EXPECT_TRUE(datasource_variable) << "no `datasource` variable of type datasource, query prometheus";

  const json& panels = dashboard.at("panels");
  ASSERT_TRUE(panels.is_array());
  ASSERT_FALSE(panels.empty());
  std::set<int> ids;
  for (const json& panel : panels) {
    const std::string title = panel.value("title", std::string());
    EXPECT_FALSE(title.empty()) << panel.dump();
    EXPECT_TRUE(ids.insert(panel.value("id", -1)).second) << "panel '" << title << "': its id is missing or taken";
    const json datasource = panel.value("datasource", json());
    const bool chosen = datasource.is_string() ? datasource == "${datasource}"
                                               : datasource.is_object() && datasource.value("uid", std::string()) == "${datasource}";
    EXPECT_TRUE(chosen) << "panel '" << title << "' queries " << datasource.dump() << ", not ${datasource}";
    int exprs = 0;
    for (const json& target : panel.value("targets", json::array())) {
      if (target.value("expr", std::string()).empty()) {
        ADD_FAILURE() << "panel '" << title << "' has a target without an expr: " << target.dump();
      } else {
        ++exprs;
      }
      if (target.contains("datasource")) {
        EXPECT_EQ(target["datasource"].value("uid", std::string()), "${datasource}") << "panel '" << title << "'";
      }
    }
    EXPECT_GE(exprs, 1) << "panel '" << title << "' has no query";
  }
}

// Every series a panel queries is one node's, picked by the Hostname variable.
TEST(DashboardTest, EveryPanelQueryIsFilteredByHostname) {
  const json dashboard = load_dashboard();
  ASSERT_TRUE(dashboard.is_object());
  for (const DashboardQuery& q : dashboard_queries(dashboard)) {
    if (!q.from_panel) continue;
    const std::vector<Selector> selectors = promql_selectors(q.expr);
    EXPECT_FALSE(selectors.empty()) << q.where << ": " << q.expr;
    for (const Selector& s : selectors) {
      EXPECT_NE(s.matchers.find(R"(Hostname=~"$Hostname")"), std::string::npos)
          << q.where << ": " << s.metric << " is not filtered by Hostname in " << q.expr;
    }
  }
}

TEST(DashboardTest, QueriesOnlySeriesTheExporterServes) {
  const std::set<std::string> served = exporter_families();
  // The exporter renders every family the dashboard could ask for.
  for (const char* family : {"DCGM_FI_DEV_POWER_USAGE", "joule_job_gpu_energy_joules_total", "joule_jouled_up",
                             "joule_gpu_lease_power_limit_watts"}) {
    ASSERT_TRUE(served.count(family)) << family << " not among the exporter's families";
  }
  const json dashboard = load_dashboard();
  ASSERT_TRUE(dashboard.is_object());
  const std::vector<DashboardQuery> queries = dashboard_queries(dashboard);
  EXPECT_GE(queries.size(), dashboard.at("panels").size());
  for (const std::string& problem : unserved_series(dashboard, served)) ADD_FAILURE() << problem;

  // And the check catches a series the exporter does not serve.
  json misspelt = dashboard;
  std::string& expr = misspelt["panels"][0]["targets"][0]["expr"].get_ref<std::string&>();
  const std::string metric = *promql_metric_names(expr).begin();
  expr.replace(expr.find(metric), metric.size(), metric + "_misspelt");
  const std::vector<std::string> problems = unserved_series(misspelt, served);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("panel '" + misspelt["panels"][0].value("title", std::string()) + "'"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find(metric + "_misspelt"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace joule
