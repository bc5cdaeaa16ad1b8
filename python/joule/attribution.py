# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Output of energy attribution (joule.attribute / joule.torch.attribute).

    print(joule.attribution.format_table(attributions[0], gpu_label="GPU 0"))
    open("regions.json", "w").write(joule.attribution.to_json(attributions))

format_table: one row per region, by energy (largest first), then the idle
time and a footer (the window's energy, the baseline, the scale, the notes).
to_json: every GPU's Attribution.to_dict() in a list; NaN (an unresolved
region, an interval not computed) is written as NaN, which json.loads reads.
"""
import json
import math
from typing import Iterable, List, Optional

__all__ = ["format_table", "to_json"]


def _finite(x: float) -> bool:
    return x is not None and not math.isnan(x) and not math.isinf(x)


def _scaled(x: float, units) -> str:
    """x in the largest unit of units ((factor, suffix), smallest first) it
    reaches, with three significant digits."""
    if not _finite(x):
        return "-"
    factor, suffix = units[0]
    for f, s in units:
        if abs(x) >= f:
            factor, suffix = f, s
    v = x / factor
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f} {suffix}"


def _time(s: float) -> str:
    return _scaled(s, ((1e-6, "us"), (1e-3, "ms"), (1.0, "s")))


def _energy(j: float) -> str:
    return _scaled(j, ((1e-6, "uJ"), (1e-3, "mJ"), (1.0, "J"), (1e3, "kJ"), (1e6, "MJ")))


def _power(w: float) -> str:
    return f"{w:.1f} W" if _finite(w) else "-"


def _region_power(r) -> str:
    if not r.resolved:
        return "-"
    return f"{r.power_w:+.1f} W" if getattr(r, "concurrent", False) else _power(r.power_w)


def _percent(x: float) -> str:
    return f"{x:.2f}%" if x < 10 else f"{x:.0f}%"


def _interval(energy_j: float, low_j: float, high_j: float) -> str:
    """The energy's interval relative to it, always in one form: +-x% where
    it is about symmetric, else -x% +y%; "-" where there is none (or no
    positive energy to be relative to)."""
    if not (_finite(low_j) and _finite(high_j) and _finite(energy_j) and energy_j > 0):
        return "-"
    above, below = 100.0 * (high_j - energy_j) / energy_j, 100.0 * (energy_j - low_j) / energy_j
    wider = max(above, below, 0.0)
    if abs(above - below) <= 0.2 * wider or _percent(above) == _percent(below):
        return "+-" + _percent(wider)
    return f"{'-' if below >= 0 else '+'}{_percent(abs(below))} {'+' if above >= 0 else '-'}{_percent(abs(above))}"


def _region_rows(regions) -> List[tuple]:
    """format_table's rows of regions (or totals), by energy, largest first."""
    rows: List[tuple] = []
    for r in sorted(regions, key=lambda r: -r.energy_j if _finite(r.energy_j) else math.inf):
        rows.append((
            r.name + ("" if r.resolved else " *"),
            str(r.calls),
            _time(r.gpu_time_s),
            _energy(r.energy_j),
            _energy(r.energy_per_call_j),
            f"{100.0 * r.share:.1f}%" if _finite(r.share) else "-",
            _region_power(r),
            _interval(r.energy_j, r.energy_low_j, r.energy_high_j),
        ))
    return rows


def format_table(attribution, gpu_label: Optional[str] = None) -> str:
    """A text table of one GPU's Attribution: region, calls, GPU time,
    energy, energy per call, share of the window's energy, mean power while
    the region runs (baseline included; a concurrent region's, e.g. the DDP
    all-reduce, is the power it adds, signed: "+35.0 W"), the energy's
    interval relative to it (+-x%, or -x% +y%); an idle row; a footer; the
    totals (Attribution.totals: a module's forward and backward) in the same
    columns."""
    header = ("region", "calls", "GPU time", "energy", "energy/call", "share", "power", "interval")
    rows = _region_rows(attribution.regions)
    window = attribution.window_energy_j
    idle_share = attribution.idle_energy_j / window if window > 0 else math.nan
    rows.append((
        "(idle)", "", _time(attribution.idle_time_s), _energy(attribution.idle_energy_j), "",
        f"{100.0 * idle_share:.1f}%" if _finite(idle_share) else "-",
        _power(attribution.baseline_w) if attribution.baseline_separated else "-",
        "-",  # the baseline's band is in the footer
    ))
    total_rows = _region_rows(getattr(attribution, "totals", []))
    widths = [max(len(row[i]) for row in rows + total_rows + [header]) for i in range(len(header))]

    def line(row) -> str:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    out = []
    if gpu_label:
        out.append(gpu_label)
    if getattr(attribution, "simulated", False):
        out.append("SIMULATED GPU: the power below is joule's model of a GPU, not a measurement")
    out.append(line(header))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(row) for row in rows)
    out.append("")
    out.append(f"window energy: {_energy(window)} ({attribution.observations} power observations, "
               f"residual {attribution.residual_rms_w:.3g} W rms)")
    if not attribution.baseline_separated:
        out.append("baseline: not separated (powers are absolute; the idle row is at 0 W)")
    elif attribution.baseline_estimated:
        band = (f" [{attribution.baseline_low_w:.1f}, {attribution.baseline_high_w:.1f}]"
                if _finite(attribution.baseline_low_w) and _finite(attribution.baseline_high_w) else "")
        out.append(f"baseline: {attribution.baseline_w:.1f} W{band} (estimated)")
    else:
        out.append(f"baseline: {attribution.baseline_w:.1f} W (given)")
    out.append(f"scale: {attribution.scale:.4f} (measured energy / the fit's integral)")
    if any(not r.resolved for r in attribution.regions):
        out.append("*: the data do not determine this region's power (see the notes)")
    if total_rows:
        out += ["", "totals (each the sum of its regions, the interval the sum's):"]
        out.extend(line(row) for row in total_rows)
    for note in attribution.notes:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"


def to_json(attributions: Iterable, indent: Optional[int] = 2) -> str:
    """Every GPU's attribution as a JSON list of Attribution.to_dict()."""
    return json.dumps([a.to_dict() for a in attributions], indent=indent)


def to_html(attributions: Iterable, path: str, title: str = "Energy per region",
            gpu_labels: Optional[List[str]] = None) -> None:
    """Writes the page of a window's attribution to path: per GPU, each
    region's share of the window's time beside its share of the energy, and
    the sortable table (self-contained HTML, as `joule report` writes)."""
    from . import _joule

    page = _joule.attribution_page(title, list(attributions), list(gpu_labels or []))
    with open(path, "w") as out:
        out.write(page)
