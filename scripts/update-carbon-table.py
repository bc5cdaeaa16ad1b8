#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Builds data/carbon/grid-intensity.csv from CodeCarbon's data files (python3 stdlib only).

The numbers are facts taken from three files in CodeCarbon's repository (MIT; the files carry
figures from Our World in Data, US EPA eGRID 2016 and Google Cloud): see data/carbon/README.md.

    git clone https://github.com/mlco2/codecarbon   # or any checkout / bare mirror
    scripts/update-carbon-table.py --codecarbon PATH [--rev HEAD] [--iso-codes FILE] [--out data/carbon/grid-intensity.csv]

PATH may be a work tree or a bare git directory (then the files are read with `git show REV:...`).
ISO 3166-1 alpha-2 codes come from Debian's iso-codes (package iso-codes:
/usr/share/iso-codes/json/iso_3166-1.json, the default of --iso-codes), matched by alpha-3.
"""
import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys

OWID = "codecarbon/data/private_infra/global_energy_mix.json"
EGRID = "codecarbon/data/private_infra/2016/usa_emissions.json"
CLOUD = "codecarbon/data/cloud/impact.csv"

LB_IN_G = 453.59237  # 1 lb = 453.59237 g, so lbs/MWh * 0.45359237 = g/kWh

SOURCE_OWID = "Our World in Data (Ember; Energy Institute Statistical Review) CC BY 4.0"
SOURCE_EGRID = "US EPA eGRID 2016 (public domain; converted from lb/MWh)"
SOURCE_GCP = "Google Cloud region carbon data https://cloud.google.com/sustainability/region-carbon#data"

COLUMNS = ["kind", "code", "alpha2", "name", "country_iso3", "g_per_kwh", "year", "source"]
ISO_CODES = "/usr/share/iso-codes/json/iso_3166-1.json"


def read(repo, rev, path):
    if os.path.isfile(os.path.join(repo, path)):
        with open(os.path.join(repo, path), encoding="utf-8-sig") as f:
            return f.read()
    out = subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], check=True, capture_output=True)
    return out.stdout.decode("utf-8-sig")


def fmt(value):
    return f"{value:.1f}"


def alpha2_of(path):
    with open(path, encoding="utf-8") as f:
        return {e["alpha_3"].upper(): e["alpha_2"].upper() for e in json.load(f)["3166-1"]}


def countries(text, alpha2):
    rows = []
    for key, entry in sorted(json.loads(text).items()):
        value = entry.get("carbon_intensity")
        # A zero intensity (no generation data) is a missing value, not a clean grid.
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            print(f"skipped country {key} ({entry.get('country_name')}): carbon_intensity {value!r}", file=sys.stderr)
            continue
        if key.upper() not in alpha2:
            sys.exit(f"country {key} is not an ISO 3166-1 alpha-3 code in the iso-codes list")
        rows.append(["country", key.upper(), alpha2[key.upper()], entry["country_name"], key.upper(), fmt(value),
                     str(entry["year"]), SOURCE_OWID])
    return rows


def us_states(text):
    rows = []
    data = json.loads(text)
    unit = data.get("_unit", {}).get("emissions")
    if unit != "lbs/MWh":
        sys.exit(f"{EGRID}: unit {unit!r}, expected lbs/MWh")
    for name, entry in sorted(data.items()):
        if name in ("_unit", "usa"):  # the US as a whole comes from OWID (newer)
            continue
        code = entry["regionCode"].upper()
        g_per_kwh = entry["emissions"] * LB_IN_G / 1000.0
        rows.append(["us-state", f"US-{code}", "", name.title().replace(" Of ", " of "), "USA", fmt(g_per_kwh), "2016", SOURCE_EGRID])
    return rows


def cloud(text):
    rows = []
    for r in csv.DictReader(io.StringIO(text)):
        value = r["impact"].strip()
        if not value:
            continue
        provider, region = r["provider"].strip(), r["region"].strip()
        name = f"{r['providerName'].strip()} {region}"
        place = "; ".join(p for p in (r["city"].strip(), r["country_name"].strip()) if p)
        if place:
            name += f" ({place})"
        source = r["source"].strip() or SOURCE_GCP
        if source.startswith("https://cloud.google.com/"):
            source = SOURCE_GCP
        # CodeCarbon took these values from Google's page in July 2024 (commit ca104ad9).
        rows.append(["cloud", f"{provider}:{region}", "", name, r["countryIsoCode"].strip().upper(), fmt(float(value)), "2024", source])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--codecarbon", required=True, help="CodeCarbon checkout or bare git directory")
    ap.add_argument("--rev", default="HEAD", help="revision, for a git directory (default HEAD)")
    ap.add_argument("--iso-codes", default=ISO_CODES, help=f"ISO 3166-1 list of Debian's iso-codes (default {ISO_CODES})")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "carbon", "grid-intensity.csv"))
    args = ap.parse_args()
    rows = countries(read(args.codecarbon, args.rev, OWID), alpha2_of(args.iso_codes))
    rows += us_states(read(args.codecarbon, args.rev, EGRID))
    rows += cloud(read(args.codecarbon, args.rev, CLOUD))
    # joule's CSV reader takes no quoting: no field may hold a comma or a quote.
    for r in rows:
        for field in r:
            if "," in field or '"' in field:
                sys.exit(f"field {field!r} of row {r[1]} holds a comma or a quote")
    codes = [r[1].lower() for r in rows] + [r[2].lower() for r in rows if r[2]]
    if len(set(codes)) != len(codes):
        sys.exit("duplicate codes in the table")
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
