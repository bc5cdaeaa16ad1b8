// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The carbon and cost flags shared by `joule measure`, `joule report` and
// `joule exporter`, and how a footprint is printed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "joule/carbon/carbon.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace joule::cli {

struct CarbonFlags {
  std::string region;
  double g_per_kwh = 0.0;
  double pue = 1.0;
  double price_per_kwh = 0.0;
  std::string currency;
  std::string table;
  CLI::Option* region_option = nullptr;
  CLI::Option* intensity_option = nullptr;
  CLI::Option* price_option = nullptr;
  CLI::Option* table_option = nullptr;

  // What was given, unchecked (carbon::resolve checks it).
  carbon::Settings settings() const;
};

// --carbon-region, --carbon-intensity, --pue, --price, --currency, --carbon-table.
// `what` says what the figures are of ("the run", "each configuration", "each job").
// with_price: --price and --currency too.
void add_carbon_options(CLI::App& app, CarbonFlags& flags, const std::string& what, bool with_price = true);

// {"energy_kwh", "co2e_g", "cost", "currency", "g_per_kwh", "pue", "region",
//  "region_name", "source", "year"}: null where not known.
nlohmann::json carbon_json(const carbon::Basis& basis, const carbon::Footprint& footprint);
// "joule: carbon: ..." and "joule: cost: ..." lines.
std::string carbon_text(const carbon::Basis& basis, const carbon::Footprint& footprint);
// "FRA (France), Our World in Data ..., 2023" or "given with --carbon-intensity".
std::string basis_description(const carbon::Basis& basis);

}  // namespace joule::cli
