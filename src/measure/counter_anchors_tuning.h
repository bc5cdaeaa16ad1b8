// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The tuning of counter anchors (private to src/measure): the figures the
// grid search, the anchors and the edge reads share, each with its reason.
#pragma once

#include <cstddef>
#include <cstdint>

namespace joule {

// A step seen between two back-to-back reads is placed at the midpoint of
// their midpoints: within about half a read (~2 ms on an H100) of wherever
// inside a read the driver takes its value, plus this.
constexpr double kPlacementSlackS = 0.0005;
// Two reads further apart than this (the thread was held up, or read
// another GPU in between) do not place a step.
constexpr double kMaxReadGap = 0.0015;
// A read that took longer than this many times the usual read, plus the
// slack, was held up inside (the thread lost its CPU in the driver or right
// around it): where in it the driver took its value is unknown, so it places
// no step. A grid placed from such reads drifts by up to half the delay,
// which a window edge pays in full (under CPU load: 1-2% of a 0.4 s window).
constexpr double kHeldUpReadFactor = 1.5;
constexpr double kHeldUpReadSlackS = 0.001;
// Steps closer than this are not steps: the counter moves continuously.
constexpr double kMinPeriod = 0.005;
constexpr double kNever = -1e300;
constexpr std::size_t kMaxLockPoints = 32;
// The next GPU's search may begin once this GPU's grid, left unchecked this
// many steps past its last check, still places steps within the margin: the
// search reads back to back for up to a few hundred ms, and this GPU's
// checks wait it out. (On an H100 that takes one check after the search.)
constexpr int64_t kUncheckedSteps = 5;
// Before a GPU's grid is known, an edge gets two reads this far apart, kept
// until the grid places them: a read within ~27 ms of a step (margin_s after
// it, margin_s / 2 and a read before the next) cannot be placed, and two
// reads 40 ms apart are not both that near a step of a ~100 ms grid.
constexpr double kEarlyReadSpacingS = 0.04;
// An edge this near a read already kept (or wanted) wants no more.
constexpr double kEarlyReadCoverS = 0.1;
// Early reads this late are of no use to their edge (beyond max_distance_s).
constexpr double kEarlyReadLatenessS = 0.2;
// Reads kept for placing, per GPU at most (they are dropped, like anchors,
// once older than history_s).
constexpr std::size_t kMaxUnplacedReads = 64;
constexpr double kLockPointSpan = 120.0;
// A search that saw no two steps (another reader holding the driver, a
// counter stalled) pauses this long before it starts over, twice as long
// after each failure, up to the most: a search reads back to back for up to
// a second, so at the most ~1.7% of a core while it keeps failing.
constexpr double kFirstSearchPauseS = 2.0;
constexpr double kMaxSearchPauseS = 60.0;
// Reads per poll() call at most, so a broken clock cannot spin it.
constexpr int kMaxReadsPerPoll = 256;
// A counter read at the edges (reads_at_edges): it is read this many times
// per update period, so each update it shows is placed to within 1/32 of a
// period (~0.03 ms on a 1 ms counter) at a fraction of back-to-back reads'
// CPU; and a read duration above a quarter period could not place them.
constexpr double kEdgeReadsPerPeriod = 16.0;
constexpr double kMaxEdgeReadShare = 0.25;
// Reads farther apart than this share of the period may hold two updates
// (a grid a little irregular, or the period measured a little long).
constexpr double kMaxPlacingSpacing = 0.9;
// How late after its edge a read may start and still serve it: the stretch
// from the edge to the first update read is taken at the counter's rate just
// after it, wrong where the load changes inside (this long at most, plus a
// period); later, the edge keeps the power integral.
constexpr double kEdgeReadLatenessS = 0.005;
// A run of edge reads that places no two updates within this many periods
// (a counter that stopped moving, e.g. at 0 W) gives its edges up.
constexpr double kEdgeScanPeriods = 10.0;

}  // namespace joule
