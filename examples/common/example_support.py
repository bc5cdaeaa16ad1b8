# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What the Python examples (hf_trainer/, lightning/, accelerate/) share
besides joule's own lines: the missing-package check, joule's options from
their flags, and the result they print and hand to bench/gpu_frameworks.py.
Each example puts this folder (examples/common: only this module, so
nothing shadows a package such as accelerate or lightning) on sys.path
and imports it."""
import importlib.util
import sys
import time


def add_joule_flags(parser):
    """The flags every example has for joule: off, per-step CUDA waits, CO2e."""
    parser.add_argument("--no-joule", action="store_true", help="the same run without joule (to measure its overhead)")
    parser.add_argument("--joule-sync", action="store_true",
                        help="every joule window edge waits for queued CUDA work (a step's kernels count in its own "
                             "window; costs per step: by default only the run's first and last edges wait)")
    parser.add_argument("--carbon-region", default=None,
                        help="grid region for CO2e, e.g. DE, FR, US-CA (joule's bundled table)")
    parser.add_argument("--pue", type=float, default=None, help="data-centre PUE for CO2e (default: joule's)")


def require(name, modules):
    """Exits with one line naming every missing package and how to get it."""
    missing = [hint for module, hint in modules if importlib.util.find_spec(module) is None]
    if missing:
        sys.exit(f"{name}: missing {'; '.join(missing)}")


def joule_monitor(joule, args):
    """None (joule's default monitor: only the run's first and last edges wait for CUDA), or with --joule-sync one
    whose every window edge waits."""
    if not args.joule_sync:
        return None
    import joule.meter

    return joule.meter.make_monitor(synchronize=True)


def joule_carbon(joule, args, name):
    """joule.Carbon for --carbon-region (None without it)."""
    if not args.carbon_region:
        return None
    if not hasattr(joule, "Carbon"):
        sys.exit(f"{name}: --carbon-region needs joule.Carbon, which this joule module lacks (build a newer joule)")
    kwargs = {"region": args.carbon_region}
    if args.pue is not None:
        kwargs["pue"] = args.pue
    return joule.Carbon(**kwargs)


def callback_summary(callback):
    """A callback's run summary (what it wrote to joule_energy.json), and its
    training window's span on time.monotonic()'s clock (for
    bench/gpu_frameworks.py, which lines it up with `joule measure`)."""
    summary = dict(callback.summary)
    summary["summary_path"] = callback.summary_path
    meter = callback.meter
    train = next((o for o in meter.outer_done if o["name"] == "train"), None)
    if train is not None and meter.monitor is not None:
        offset = time.monotonic() - meter.monitor.clock_s()
        summary["window_monotonic_s"] = [train["begin_s"] + offset, train["begin_s"] + train["time_s"] + offset]
    return summary


def print_result(r):
    print(f"\n{r['example']}: {r['steps']} steps ({r['samples']} samples"
          + (f", {r['tokens']} tokens" if r.get("tokens") else "") + f") in {r['train_s']:.1f} s on {r['device']}"
          + (f", median step {r['step_period_median_s'] * 1e3:.2f} ms" if r["step_period_median_s"] else ""))
    s = r.get("joule_summary")
    if not s:
        print("joule: off (--no-joule)")
        return
    line = f"joule measured: {s['energy_j']:.1f} J, average {s['average_power_w']:.1f} W over {s['time_s']:.1f} s"
    if s.get("energy_per_sample_j") is not None:
        line += f", {s['energy_per_sample_j']:.4g} J/sample"
    if s.get("energy_per_token_j") is not None:
        line += f", {s['energy_per_token_j'] * 1e3:.4g} mJ/token"
    print(line)
    if s.get("co2e_g") is not None:
        print(f"joule CO2e: {s['co2e_g']:.4g} g" + (f", cost {s['cost']:.4g} {s.get('currency') or ''}" if s.get("cost") is not None else ""))
    if s.get("summary_path"):
        print(f"joule summary: {s['summary_path']}")
