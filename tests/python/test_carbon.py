"""Carbon and cost: the bundled grid-intensity table (read with the standard library, as a
user or a script would) and the `joule.Carbon` binding against hand-computed values."""
import csv
import math
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "data" / "carbon" / "grid-intensity.csv"
COLUMNS = ["kind", "code", "name", "country_iso3", "g_per_kwh", "year", "source"]


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
    codes = [r["code"].lower() for r in rows]
    assert len(set(codes)) == len(codes), "codes are unique"
    for r in rows:
        value = float(r["g_per_kwh"])
        assert math.isfinite(value) and 0 < value < 2000, r
        assert 2000 <= int(r["year"]) <= 2030, r
        assert r["source"].strip() and r["name"].strip(), r
        assert re.fullmatch(r"[A-Z]{3}", r["country_iso3"]), r
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
    subprocess.run([sys.executable, str(ROOT / "scripts" / "update-carbon-table.py"), "--codecarbon", mirror,
                    "--rev", "b05965e43b690cdc53787c7577adbe6e2caf4ed9", "--out", str(out)],
                   check=True, capture_output=True)
    assert out.read_text() == TABLE.read_text()
