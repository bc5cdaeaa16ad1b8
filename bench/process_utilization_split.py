#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The splits of a shared GPU that bench/process_utilization_gpu.py's records allow, against the share
of the work each process got (the matrix products it finished):

- by utilisation, as the exporter makes it: each second, the samples newer than the newest seen
  before, each process weighted by its smUtil; equal where there is none;
- equal, as before.

  python3 bench/process_utilization_split.py bench/results/2026-11-29-process-utilization-h200/raw-duty*.json
"""
import json
import sys


def main():
    for path in sys.argv[1:]:
        with open(path) as f:
            doc = json.load(f)
        pids, work = doc["pids"], doc["products_done"]
        work_share = work[0] / sum(work)
        seen_us, first_share_sum, seconds, sampled = 0, 0.0, 0, [0, 0]
        for record in doc["raw"]:
            newest = seen_us
            weights = [0.0, 0.0]
            for pid, stamp, sm_util in record["samples"]:
                if stamp <= seen_us or pid not in pids:
                    continue
                weights[pids.index(pid)] += sm_util
                sampled[pids.index(pid)] += 1
                newest = max(newest, stamp)
            seen_us = newest
            first_share_sum += weights[0] / sum(weights) if sum(weights) > 0 else 0.5
            seconds += 1
        split = first_share_sum / seconds
        print(f"{path}: second process busy {doc['duty']:g} of the time; work {work_share:.3f}/{1 - work_share:.3f}; "
              f"by utilisation {split:.3f}/{1 - split:.3f} ({split - work_share:+.3f}); "
              f"equal 0.500/0.500 ({0.5 - work_share:+.3f}); seconds with a new sample {sampled} of {seconds}")


if __name__ == "__main__":
    main()
