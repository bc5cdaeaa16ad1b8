# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.Carbon and joule.carbon_regions. A pip install carries the
grid-intensity table inside this package (share/joule/carbon/, where the
wheel's `joule` program finds it too); this module tells the C++ search where
that is, and the search keeps its one order (docs/carbon.md): an explicit
table=, $JOULE_CARBON_TABLE, $JOULE_DATA_DIR, then this package's copy, the
executable's share/joule, the source tree."""
import os
from typing import Optional

from . import _joule

_SHARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "joule")
if os.path.isdir(_SHARE):
    _joule._set_package_share_dir(_SHARE)

Carbon = _joule.Carbon
carbon_regions = _joule.carbon_regions
carbon_table_path = _joule.carbon_table_path


def packaged_table() -> Optional[str]:
    """The table inside this package, or None where it has none."""
    path = os.path.join(_SHARE, "carbon", "grid-intensity.csv")
    return path if os.path.isfile(path) else None
