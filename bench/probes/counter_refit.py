#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Refits a proof run offline: what the energy counter's increments add
(issue 53, item 4). Reads bench/gpu_attribution_proof.py --read-counter's
raw.json (samples, counter values, region pieces) and result.json (the
measured response, the truths in the mix) and attributes the full window
through joule.attribute_data: by the response and by the boxcar, each with
and without the increments, then by the response with the counter placed at
given lags, and by four boxcars that do not describe the samples, with and
without the increments. Prints each region's error against its truth in the
mix.
No GPU; joule importable (here: PYTHONPATH=build/python).

    PYTHONPATH=build/python python3 bench/probes/counter_refit.py bench/results/2026-11-30-h200-counter-increments
"""
import argparse
import json

import joule


def errors_in_mix(attribution, in_mix):
    """{region: attributed energy per call / truth in the mix - 1}."""
    out = {}
    for r in attribution.regions:
        name = r.name[:-len(".forward")] if r.name.endswith(".forward") else r.name
        if name in in_mix and r.calls:
            out[name] = r.energy_per_call_j / in_mix[name] - 1
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--lags-ms", default="0,5,10,15,20,25,30")
    p.add_argument("--bootstrap-rounds", type=int, default=100)
    args = p.parse_args()
    result = json.load(open(f"{args.run_dir}/result.json"))
    raw = json.load(open(f"{args.run_dir}/raw.json"))
    r = result["sample_response"]
    response = joule.SampleResponse(r["response_ms"], r["first_lag_ms"], r["rounds"], r["rounds_first_lag_ms"])
    in_mix = result["in_mix"]

    def fit(**options):
        return joule.attribute_data(raw["samples"], raw["counter"], raw["intervals"], raw["begin_s"], raw["end_s"],
                                    raw["energy_j"], bootstrap_rounds=args.bootstrap_rounds, **options)

    def line(label, a):
        print(f"{label:34s} " + "  ".join(f"{k} {100 * v:+.1f}%" for k, v in errors_in_mix(a, in_mix).items()))
        for note in a.notes:
            if "energy-counter" in note:
                print(f"{'':34s} ({note})")

    print(f"{len(raw['counter'])} counter values, {len(raw['samples'])} samples; errors against the truths in the mix")
    variants = [("response, with the counter", {"sample_response": response}),
                ("response, without", {"sample_response": response, "counter_increments": False}),
                ("boxcar, with the counter", {}),
                ("boxcar, without", {"counter_increments": False})]
    for label, options in variants:
        line(label, fit(**options))
    for lag in (float(x) for x in args.lags_ms.split(",") if x):
        line(f"response, counter {lag:g} ms late", fit(sample_response=response, counter_lag_ms=lag))
    # Boxcars that do not describe the samples (cover/delay in ms): do the increments undo them?
    for cover, delay in ((20, 0), (10, 0), (20, 10), (5, 30)):
        for counter in (False, True):
            line(f"boxcar {cover}/{delay} ms, {'with the counter' if counter else 'without'}",
                 fit(sample_cover_ms=cover, sample_delay_ms=delay, counter_increments=counter))


if __name__ == "__main__":
    main()
