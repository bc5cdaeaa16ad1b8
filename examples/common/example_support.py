# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""What the Python examples (hf_trainer/, lightning/, accelerate/) share
besides joule's own lines: the missing-package check, joule's options from
their flags, and the result they print and hand to bench/gpu_frameworks.py.
Each example puts this folder (examples/common: only this module, so
nothing shadows a package such as accelerate or lightning) on sys.path
and imports it."""
import importlib.util
import random
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
    parser.add_argument("--joule-ab", type=int, default=0, metavar="STEPS",
                        help="benchmark: joule's per-step work runs only in half the blocks of STEPS steps "
                             "(groups of four blocks, on off off on or off on on off, drawn at random) so one run times "
                             "steps with and without it side by side (bench/gpu_frameworks.py); the run's own window "
                             "stays whole")
    parser.add_argument("--joule-ab-null", action="store_true",
                        help="with --joule-ab: the control (A/A) run: blocks are labelled on and off alike but joule's "
                             "per-step work runs in all of them, so the estimate shows what the method reads with no "
                             "difference at all")


class StepGate:
    """--joule-ab: joule's per-step hooks work in blocks of `block` steps, in
    groups of four blocks ordered on, off, off, on or off, on, on, off, the
    order of each group drawn at random (seeded): the mirrored halves cancel
    a drift in step time over a group, and the draw keeps a periodic pattern
    of the run (an epoch's first batch every 64 steps, logging every 10)
    from falling on one side more often. Each step's state is kept beside
    its period. Runs with and without joule differ by a few percent from
    process to process (the two no-joule runs of an example by 1.3-7.6% on
    an H100), more than the 0.5% to be shown; blocks of one process do not.

    The state of a step is fixed by its begin hook (`wrap`'s `begin`), so a
    step's begin and end hooks always agree. null=True (--joule-ab-null):
    the hooks run in every block, the labels are drawn the same way: the
    control run, whose estimate should be 0."""

    def __init__(self, block, null=False, seed=1):
        self.block = block
        self.null = null
        self.steps_begun = 0
        self.on = True
        self.states = []  # per recorded step end: whether the step's block is labelled on
        self.hook_s = []  # per recorded step end: time spent inside joule's hooks since the previous one
        self._hook_s = 0.0
        self._rng = random.Random(seed)
        self._group = -1
        self._mirrored = False

    def begin_step(self):
        """Called as a step begins (by `wrap`'s begin hook, or by a plain loop)."""
        block_index = self.steps_begun // self.block
        group = block_index // 4
        if group != self._group:
            self._group, self._mirrored = group, self._rng.random() < 0.5
        self.on = (block_index % 4 in (0, 3)) != self._mirrored
        self.steps_begun += 1

    @property
    def runs_hooks(self):
        """Whether joule's per-step work runs in this step (always in the control run)."""
        return self.on or self.null

    def wrap(self, callback, begin, others):
        """Makes callback.begin and callback.others (method names) run only while on."""
        def gated(method, is_begin):
            def call(*args, **kwargs):
                if is_begin:
                    self.begin_step()
                if not self.runs_hooks:
                    return None
                t0 = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    self._hook_s += time.perf_counter() - t0
            return call

        setattr(callback, begin, gated(getattr(callback, begin), True))
        for name in others:
            setattr(callback, name, gated(getattr(callback, name), False))

    def timed(self, fn):
        """fn() counted as time inside joule (a plain loop's joule call)."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self._hook_s += time.perf_counter() - t0

    def record_step_end(self):
        self.states.append(self.on)
        self.hook_s.append(self._hook_s)
        self._hook_s = 0.0


def require(name, modules):
    """Exits with one line naming every missing package and how to get it.
    modules: (module, hint) pairs; "a|b" is found when either module is."""
    missing = [hint for module, hint in modules
               if not any(importlib.util.find_spec(m) is not None for m in module.split("|"))]
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
