// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/carbon_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/number_options.h"
#include "joule/analyze/units_format.h"

namespace joule::cli {

carbon::Settings CarbonFlags::settings() const {
  carbon::Settings s;
  if (region_option && region_option->count() > 0) s.region = region;
  if (intensity_option && intensity_option->count() > 0) s.g_per_kwh = g_per_kwh;
  if (price_option && price_option->count() > 0) s.price_per_kwh = price_per_kwh;
  if (table_option && table_option->count() > 0) s.table_path = table;
  s.pue = pue;
  s.currency = currency;
  return s;
}

// No grid's energy costs this much per kWh in any currency joule is used with;
// a larger figure is a typo.
constexpr double kMostPricePerKwh = 1e6;

void add_carbon_options(CLI::App& app, CarbonFlags& flags, const std::string& what, bool with_price) {
  const std::string group = "Carbon and cost";
  flags.region_option =
      app.add_option("--carbon-region", flags.region,
                     fmt::format("grams of CO2e for {} at this region's average grid intensity: a code or name from "
                                 "the bundled table (FRA or FR, US-CA, gcp:europe-west1; share/joule/carbon)",
                                 what))
          ->group(group);
  flags.intensity_option =
      add_number_option(app, "--carbon-intensity", flags.g_per_kwh, {0.0, carbon::kMaxGramsPerKwh},
                        fmt::format("grams of CO2e for {} at this grid intensity, g CO2e/kWh", what))
          ->group(group);
  add_number_option(app, "--pue", flags.pue, {1.0, 3.0},
                    "power usage effectiveness of the facility (default 1.0): energy x PUE")
      ->group(group);
  if (with_price) {
    flags.price_option = add_number_option(app, "--price", flags.price_per_kwh, {0.0, kMostPricePerKwh},
                                           fmt::format("cost of {} at this price per kWh (x PUE)", what))
                             ->group(group);
    app.add_option("--currency", flags.currency, "the price's currency, a label (EUR, USD)")->group(group);
  }
  flags.table_option =
      app.add_option("--carbon-table", flags.table,
                     "a carbon-intensity table in the bundled format instead of the bundled one (also "
                     "$JOULE_CARBON_TABLE)")
          ->group(group);
}

nlohmann::json carbon_json(const carbon::Basis& b, const carbon::Footprint& f) {
  const auto or_null = [](const auto& optional) -> nlohmann::json {
    if (optional) return *optional;
    return nullptr;
  };
  const auto text_or_null = [](const std::string& s) -> nlohmann::json {
    if (s.empty()) return nullptr;
    return s;
  };
  return {{"energy_kwh", f.energy_kwh},
          {"co2e_g", or_null(f.co2e_g)},
          {"cost", or_null(f.cost)},
          {"currency", b.price_per_kwh ? nlohmann::json(b.currency) : nlohmann::json(nullptr)},
          {"g_per_kwh", or_null(b.g_per_kwh)},
          {"pue", b.pue},
          {"price_per_kwh", or_null(b.price_per_kwh)},
          {"region", text_or_null(b.region)},
          {"region_name", text_or_null(b.region_name)},
          {"source", text_or_null(b.source)},
          {"year", or_null(b.year)}};
}

std::string basis_description(const carbon::Basis& b) {
  if (b.region.empty()) return "given with --carbon-intensity";
  return fmt::format("{} ({}), {}, {}", b.region, b.region_name, b.source, *b.year);
}

std::string carbon_text(const carbon::Basis& b, const carbon::Footprint& f) {
  std::string out;
  if (f.co2e_g) {
    out += fmt::format("joule: carbon: {} g CO2e = {} kWh x PUE {:g} x {:g} g CO2e/kWh (average grid "
                       "intensity: {})\n",
                       format_plain(*f.co2e_g, 4), format_plain(f.energy_kwh, 5), b.pue, *b.g_per_kwh,
                       basis_description(b));
  }
  if (f.cost) {
    const std::string currency = b.currency.empty() ? "" : " " + b.currency;
    out += fmt::format("joule: cost: {}{} = {} kWh x PUE {:g} x {:g}{} per kWh\n", format_plain(*f.cost, 4),
                       currency, format_plain(f.energy_kwh, 5), b.pue, *b.price_per_kwh, currency);
  }
  return out;
}

}  // namespace joule::cli
