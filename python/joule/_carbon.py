# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.Carbon and joule.carbon_regions, reading the grid-intensity table
that ships inside this package when pip installed it (share/joule/carbon/,
where the wheel's `joule` program finds it too), so a
pip install far from the source tree finds it. An explicit table=,
$JOULE_CARBON_TABLE or $JOULE_DATA_DIR still come first, and without a
packaged copy the C++ search decides (share/joule/carbon of the
interpreter's prefix, as the Debian package installs it; the source tree)."""
import os
from typing import Optional

from . import _joule


def packaged_table() -> Optional[str]:
    """The table inside this package, or None where it has none."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "joule", "carbon",
                        "grid-intensity.csv")
    return path if os.path.isfile(path) else None


def _table(table: Optional[str]) -> Optional[str]:
    if table is not None or os.environ.get("JOULE_CARBON_TABLE") or os.environ.get("JOULE_DATA_DIR"):
        return table
    return packaged_table()


class Carbon(_joule.Carbon):
    __doc__ = _joule.Carbon.__doc__

    def __init__(self, region: Optional[str] = None, g_per_kwh: Optional[float] = None, pue: float = 1.0,
                 price_per_kwh: Optional[float] = None, currency: str = "", table: Optional[str] = None) -> None:
        super().__init__(region=region, g_per_kwh=g_per_kwh, pue=pue, price_per_kwh=price_per_kwh,
                         currency=currency, table=_table(table))


def carbon_regions(table: Optional[str] = None) -> list:
    """The bundled table of average grid intensity (see joule._joule.carbon_regions)."""
    return _joule.carbon_regions(table=_table(table))
