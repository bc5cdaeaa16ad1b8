# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Carbon and cost: the bundled grid-intensity table (read with the standard library, as a
user or a script would) and the `joule.Carbon` binding against hand-computed values."""
import csv
import math
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "data" / "carbon" / "grid-intensity.csv"
COLUMNS = ["kind", "code", "alpha2", "name", "country_iso3", "g_per_kwh", "year", "source"]


def table_rows():
    with open(TABLE, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        assert next(reader) == COLUMNS
        return [dict(zip(COLUMNS, row, strict=True)) for row in reader]


def test_bundled_table_loads_and_every_entry_is_sane_and_sourced():
    rows = table_rows()
    assert len(rows) > 250
    kinds = {r["kind"] for r in rows}
    assert kinds == {"country", "us-state", "cloud"}
    codes = [r["code"].lower() for r in rows] + [r["alpha2"].lower() for r in rows if r["alpha2"]]
    assert len(set(codes)) == len(codes), "codes are unique"
    for r in rows:
        value = float(r["g_per_kwh"])
        assert math.isfinite(value) and 0 < value < 2000, r
        assert 2000 <= int(r["year"]) <= 2030, r
        assert r["source"].strip() and r["name"].strip(), r
        assert re.fullmatch(r"[A-Z]{3}", r["country_iso3"]), r
        assert re.fullmatch(r"[A-Z]{2}" if r["kind"] == "country" else "", r["alpha2"]), r
        assert "," not in "".join(r.values()) and '"' not in "".join(r.values()), r
    by_code = {r["code"]: r for r in rows}
    # Spot checks against the sources (see data/carbon/README.md).
    assert by_code["FRA"]["name"] == "France" and float(by_code["FRA"]["g_per_kwh"]) < 100
    assert by_code["US-VT"]["year"] == "2016"
    # eGRID 2016 Vermont: 56.89 lb/MWh x 0.45359237 = 25.805 g/kWh
    assert float(by_code["US-VT"]["g_per_kwh"]) == pytest.approx(25.8)
    assert by_code["gcp:europe-north1"]["country_iso3"] == "FIN"


def test_the_generator_rebuilds_the_table_when_the_sources_are_mirrored(tmp_path):
    import os
    import subprocess
    import sys
    mirror = os.environ.get("JOULE_CODECARBON_MIRROR", "")
    if not mirror or not os.path.isdir(mirror):
        pytest.skip(f"no CodeCarbon checkout at {mirror} (set JOULE_CODECARBON_MIRROR)")
    out = tmp_path / "table.csv"
    if not os.path.isfile("/usr/share/iso-codes/json/iso_3166-1.json"):
        pytest.skip("no Debian iso-codes (apt-get install iso-codes)")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "update-carbon-table.py"), "--codecarbon", mirror,
                    "--rev", "b05965e43b690cdc53787c7577adbe6e2caf4ed9", "--out", str(out)],
                   check=True, capture_output=True)
    assert out.read_text() == TABLE.read_text()


# The binding, as the package exports it.
def _binding():
    import joule
    return joule.Carbon, joule.carbon_regions


FOOTPRINT_KEYS = {"energy_kwh", "co2e_g", "cost", "currency", "g_per_kwh", "pue", "region", "source", "year"}


def test_footprint_of_a_region_matches_hand_computed_values():
    Carbon, _ = _binding()
    carbon = Carbon(region="us-vt", pue=1.5, price_per_kwh=0.2, currency="USD")
    assert (carbon.region, carbon.region_name, carbon.year) == ("US-VT", "Vermont", 2016)
    fp = carbon.footprint(7.2e6)  # 2 kWh; x 1.5 = 3 kWh; x 25.8 g = 77.4 g; x 0.2 = 0.6 USD
    assert set(fp) == FOOTPRINT_KEYS
    assert fp["energy_kwh"] == pytest.approx(2.0, rel=1e-15)
    assert fp["co2e_g"] == pytest.approx(77.4, rel=1e-12)
    assert fp["cost"] == pytest.approx(0.6, rel=1e-12)
    assert fp["currency"] == "USD"
    assert fp["g_per_kwh"] == 25.8 and fp["pue"] == 1.5 and fp["year"] == 2016 and fp["region"] == "US-VT"
    assert "eGRID" in fp["source"]
    # Positional region, name or alpha-2 instead of the code.
    assert Carbon("France").footprint(3.6e6)["co2e_g"] == pytest.approx(56.0)
    assert Carbon("fr").region == "FRA"


def test_footprint_of_a_given_intensity_and_of_a_price_alone():
    Carbon, _ = _binding()
    fp = Carbon(g_per_kwh=400).footprint(900e3)  # 0.25 kWh x 400 g
    assert set(fp) == FOOTPRINT_KEYS
    assert fp["co2e_g"] == pytest.approx(100.0) and fp["cost"] is None and fp["currency"] is None
    assert (fp["region"], fp["source"], fp["year"]) == (None, "user-given", None)
    price = Carbon(price_per_kwh=0.3, pue=1.2, currency="EUR").footprint(3.6e6)
    assert price["co2e_g"] is None and price["g_per_kwh"] is None
    assert price["cost"] == pytest.approx(0.36) and price["currency"] == "EUR"


def test_bad_arguments_raise_usage_error_naming_the_argument():
    import joule
    Carbon, _ = _binding()
    cases = [
        (dict(pue=0.9), "pue:"),
        (dict(pue=float("nan")), "pue:"),
        (dict(g_per_kwh=-1), "g_per_kwh:"),
        (dict(g_per_kwh=float("inf")), "g_per_kwh:"),
        (dict(price_per_kwh=-0.1), "price_per_kwh:"),
        (dict(region="FRA", g_per_kwh=50), "not both"),
        (dict(currency="EUR"), "currency without price_per_kwh"),
    ]
    for kwargs, message in cases:
        with pytest.raises(joule.UsageError, match=re.escape(message)):
            Carbon(**kwargs)
    with pytest.raises(joule.UsageError, match=r"region 'Frnace': not in the carbon table .*FRA \(France\)"):
        Carbon(region="Frnace")
    with pytest.raises(joule.UsageError, match=r"GEO \(Georgia, country\), US-GA \(Georgia, us-state\)"):
        Carbon(region="georgia")
    with pytest.raises(joule.UsageError, match="energy_j"):
        Carbon(g_per_kwh=100).footprint(-1.0)


def test_carbon_regions_lists_the_table():
    _, carbon_regions = _binding()
    regions = carbon_regions()
    assert len(regions) == len(table_rows())
    by_code = {r["code"]: r for r in regions}
    assert by_code["FRA"] == {"kind": "country", "code": "FRA", "alpha2": "FR", "name": "France", "country_iso3": "FRA",
                              "g_per_kwh": 56.0, "year": 2023, "source": by_code["FRA"]["source"]}
    assert all(r["source"] and r["year"] and 0 < r["g_per_kwh"] < 2000 for r in regions)


def test_the_package_carries_its_table_and_reads_it_first(tmp_path, monkeypatch):
    import joule
    import joule._carbon

    # The build puts the table inside the package (what pip installs), and
    # joule.Carbon reads that copy unless told otherwise.
    packaged = joule._carbon.packaged_table()
    assert packaged is not None and pathlib.Path(packaged).read_bytes() == TABLE.read_bytes()
    # joule/share/joule/carbon/: where the wheel's joule program (joule/bin) finds it too
    assert pathlib.Path(packaged).parents[3] == pathlib.Path(joule.__file__).parent
    monkeypatch.delenv("JOULE_CARBON_TABLE", raising=False)
    monkeypatch.delenv("JOULE_DATA_DIR", raising=False)
    assert joule.carbon_table_path() == packaged
    assert joule.Carbon(region="FR").footprint(3.6e6)["region"] == "FRA"

    # An explicit table, and $JOULE_CARBON_TABLE, still come first.
    own = tmp_path / "own.csv"
    own.write_text(",".join(COLUMNS) + "\ncountry,FRA,FR,France,FRA,100.0,2030,a test\n")
    assert joule.Carbon(region="FRA", table=str(own)).footprint(3.6e6)["co2e_g"] == pytest.approx(100.0)
    monkeypatch.setenv("JOULE_CARBON_TABLE", str(own))
    assert joule.Carbon(region="FRA").footprint(3.6e6)["source"] == "a test"
    assert [r["source"] for r in joule.carbon_regions()] == ["a test"]
    assert joule.carbon_table_path() == str(own)
    monkeypatch.delenv("JOULE_CARBON_TABLE")
    monkeypatch.setenv("JOULE_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(joule.Error, match="JOULE_DATA_DIR="):
        joule.carbon_table_path()
