// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule.Carbon and joule.carbon_regions(): grams of CO2e and cost from
// energy, with the bundled grid-intensity table (the carbon module).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "joule/carbon/carbon.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

template <typename T>
py::object or_none(const std::optional<T>& value) {
  return value ? py::cast(*value) : py::none();
}

py::object text_or_none(const std::string& text) { return text.empty() ? py::none() : py::cast(text); }

// The package's own share/joule, which joule/_carbon.py names at import
// (a pip install carries the table there): the search's step 3.
std::string& package_share_dir() {
  static std::string dir;
  return dir;
}

joule::carbon::TableSearch table_search(const std::optional<std::string>& table) {
  joule::carbon::TableSearch search = joule::carbon::TableSearch::for_this_process();
  search.package_share_dir = package_share_dir();
  if (table) search.explicit_path = table;
  return search;
}

class Carbon {
 public:
  Carbon(std::optional<std::string> region, std::optional<double> g_per_kwh, double pue,
         std::optional<double> price_per_kwh, std::string currency, std::optional<std::string> table) {
    joule::carbon::Settings settings;
    settings.region = std::move(region);
    settings.g_per_kwh = g_per_kwh;
    settings.pue = pue;
    settings.price_per_kwh = price_per_kwh;
    settings.currency = std::move(currency);
    settings.table_path = std::move(table);
    settings.names = {"region", "g_per_kwh", "pue", "price_per_kwh", "currency"};
    basis_ = joule::carbon::resolve(settings, table_search(std::nullopt));
  }

  py::dict footprint(double energy_j) const {
    const joule::carbon::Footprint f = joule::carbon::footprint(basis_, energy_j);
    return py::dict("energy_kwh"_a = f.energy_kwh, "co2e_g"_a = or_none(f.co2e_g), "cost"_a = or_none(f.cost),
                    "currency"_a = basis_.price_per_kwh ? py::cast(basis_.currency) : py::none(),
                    "g_per_kwh"_a = or_none(basis_.g_per_kwh), "pue"_a = basis_.pue,
                    "region"_a = text_or_none(basis_.region), "source"_a = text_or_none(basis_.source),
                    "year"_a = or_none(basis_.year));
  }

  const joule::carbon::Basis& basis() const { return basis_; }

 private:
  joule::carbon::Basis basis_;
};

}  // namespace

void bind_carbon(py::module_& m) {
  py::class_<Carbon>(m, "Carbon",
                     "Grams of CO2e and cost from energy: g CO2e = kWh x g_per_kwh x pue; cost = kWh x pue x "
                     "price_per_kwh. region: a code or name of the bundled table of average grid intensity "
                     "(carbon_regions(); 'FRA', 'US-CA', 'gcp:europe-west1'), or g_per_kwh: your own figure "
                     "(not both). pue in [1, 3]; price_per_kwh >= 0 in `currency` (a label). table: another table "
                     "file in the bundled format. UsageError naming the argument for a bad value or an unknown "
                     "region (with close matches).")
      .def(py::init<std::optional<std::string>, std::optional<double>, double, std::optional<double>, std::string,
                    std::optional<std::string>>(),
           "region"_a = py::none(), "g_per_kwh"_a = py::none(), "pue"_a = 1.0,
           "price_per_kwh"_a = py::none(), "currency"_a = "", "table"_a = py::none())
      .def("footprint", &Carbon::footprint, "energy_j"_a,
           "A dict: energy_kwh (measured, before the PUE), co2e_g, cost (None without an intensity / a price), "
           "currency (None without a price), g_per_kwh, pue, region (the table's code; None for a given "
           "intensity), source ('user-given' for a given intensity), year (None for a given intensity). "
           "UsageError for energy that is negative or not finite.")
      .def_property_readonly("g_per_kwh", [](const Carbon& c) { return or_none(c.basis().g_per_kwh); })
      .def_property_readonly("pue", [](const Carbon& c) { return c.basis().pue; })
      .def_property_readonly("price_per_kwh", [](const Carbon& c) { return or_none(c.basis().price_per_kwh); })
      .def_property_readonly("currency", [](const Carbon& c) { return c.basis().currency; })
      .def_property_readonly("region", [](const Carbon& c) { return text_or_none(c.basis().region); })
      .def_property_readonly("region_name", [](const Carbon& c) { return text_or_none(c.basis().region_name); })
      .def_property_readonly("source", [](const Carbon& c) { return text_or_none(c.basis().source); })
      .def_property_readonly("year", [](const Carbon& c) { return or_none(c.basis().year); })
      .def("__repr__", [](const Carbon& c) {
        const auto& b = c.basis();
        std::string text = "Carbon(";
        if (!b.region.empty()) text += "region='" + b.region + "', ";
        if (b.g_per_kwh) text += "g_per_kwh=" + py::repr(py::float_(*b.g_per_kwh)).cast<std::string>() + ", ";
        text += "pue=" + py::repr(py::float_(b.pue)).cast<std::string>();
        if (b.price_per_kwh) {
          text += ", price_per_kwh=" + py::repr(py::float_(*b.price_per_kwh)).cast<std::string>() + ", currency='" +
                  b.currency + "'";
        }
        return text + ")";
      });

  m.def(
      "carbon_regions",
      [](std::optional<std::string> table) {
        const auto loaded = joule::carbon::IntensityTable::read(joule::carbon::find_table(table_search(table)));
        py::list rows;
        for (const auto& e : loaded.entries()) {
          rows.append(py::dict("kind"_a = e.kind, "code"_a = e.code, "alpha2"_a = e.alpha2, "name"_a = e.name,
                               "country_iso3"_a = e.country_iso3, "g_per_kwh"_a = e.g_per_kwh, "year"_a = e.year,
                               "source"_a = e.source));
        }
        return rows;
      },
      "table"_a = py::none(),
      "The bundled table of average grid carbon intensity (or `table`): a list of dicts with kind ('country', "
      "'us-state', 'cloud'), code, alpha2 (countries' ISO alpha-2, else ''), name, country_iso3, g_per_kwh, year, source.");
  m.def(
      "_set_package_share_dir", [](const std::string& dir) { package_share_dir() = dir; }, "dir"_a,
      "Where this package keeps share/joule (joule/_carbon.py sets it at import).");
  m.def(
      "carbon_table_path", [](std::optional<std::string> table) { return joule::carbon::find_table(table_search(table)); },
      "table"_a = py::none(),
      "The grid-intensity table joule.Carbon reads, by the one search order (docs/carbon.md).");
}
