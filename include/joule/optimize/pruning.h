// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// One round of batch-size pruning: start at b0, walk down (largest smaller
// size first) until a size fails to reach the target, then walk up (smallest
// larger size first) likewise. Shared by the batch-size optimizer and the
// Grid Search baseline.
#pragma once

#include <optional>
#include <vector>

namespace joule {

class PruningRound {
 public:
  PruningRound() = default;
  // sizes sorted ascending and containing b0.
  PruningRound(std::vector<int> sizes, int b0);

  // The size to try next; nullopt when the round is over.
  std::optional<int> next() const;
  // Result of trying next().
  void report(bool converged);
  bool done() const { return direction_ == kDone; }

  const std::vector<int>& sizes() const { return sizes_; }
  int b0() const { return b0_; }
  // For saving and restoring state.
  int direction() const { return direction_; }
  int cursor() const { return cursor_; }
  static PruningRound restore(std::vector<int> sizes, int b0, int direction, int cursor);

 private:
  static constexpr int kStart = 0, kDown = -1, kUp = 1, kDone = 2;
  void skip_exhausted();

  std::vector<int> sizes_;
  int b0_ = 0;
  int b0_index_ = 0;
  int direction_ = kDone;
  int cursor_ = 0;  // index of the last size tried in the current direction
};

}  // namespace joule
