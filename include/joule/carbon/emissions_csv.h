// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// An emissions.csv with CodeCarbon's column names (its EmissionsData, version
// 3.x: codecarbon/output_methods/emissions_data.py), so dashboards that chart
// CodeCarbon's file read joule's runs too. Units as CodeCarbon's: duration s,
// emissions kg CO2e, emissions_rate kg/s, powers W, energies kWh, ram GB.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace joule::carbon {

// CodeCarbon's columns, in its order.
const std::vector<std::string>& codecarbon_columns();

// Checks that `path` can take a row: absent or empty (a header will be
// written), or its first line holds exactly CodeCarbon's columns in any
// order. Throws UsageError naming the file and the columns that differ.
void check_emissions_csv(const std::string& path);

// Appends one row (values by column name; columns not given are left empty;
// a name that is not a column is a logic error) under an exclusive lock:
// writes the header first when the file is new or empty, refuses (UsageError,
// nothing written) when the header differs or the last line is unfinished.
// Values are quoted as RFC 4180 wants where they hold commas or quotes. Rows
// follow the column order of the file's own header.
void append_emissions_csv(const std::string& path, const std::map<std::string, std::string>& values);

}  // namespace joule::carbon
