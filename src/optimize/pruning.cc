// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/pruning.h"

#include <algorithm>

#include "joule/error.h"

namespace joule {

PruningRound::PruningRound(std::vector<int> sizes, int b0) : sizes_(std::move(sizes)), b0_(b0) {
  const auto it = std::find(sizes_.begin(), sizes_.end(), b0_);
  if (it == sizes_.end()) throw Error("pruning round: b0 is not among the sizes");
  b0_index_ = static_cast<int>(it - sizes_.begin());
  direction_ = kStart;
  cursor_ = b0_index_;
}

PruningRound PruningRound::restore(std::vector<int> sizes, int b0, int direction, int cursor) {
  PruningRound round(std::move(sizes), b0);
  const int n = static_cast<int>(round.sizes_.size());
  // A walk never rests below its first size or above its last (report()
  // moves on): next() would read outside the sizes.
  if (direction < kDown || direction > kDone || cursor < 0 || cursor >= n || (direction == kDown && cursor == 0) ||
      (direction == kUp && cursor + 1 >= n)) {
    throw UsageError("pruning state out of range");
  }
  round.direction_ = direction;
  round.cursor_ = cursor;
  return round;
}

std::optional<int> PruningRound::next() const {
  switch (direction_) {
    case kStart: return b0_;
    case kDown: return sizes_[cursor_ - 1];
    case kUp: return sizes_[cursor_ + 1];
    default: return std::nullopt;
  }
}

void PruningRound::report(bool converged) {
  if (direction_ == kStart) {
    direction_ = kDown;
  } else if (direction_ == kDown) {
    --cursor_;
    if (!converged) {  // sizes below a failing one are not tried
      direction_ = kUp;
      cursor_ = b0_index_;
    }
  } else if (direction_ == kUp) {
    ++cursor_;
    if (!converged) direction_ = kDone;
  }
  skip_exhausted();
}

void PruningRound::skip_exhausted() {
  if (direction_ == kDown && cursor_ == 0) {
    direction_ = kUp;
    cursor_ = b0_index_;
  }
  if (direction_ == kUp && cursor_ + 1 >= static_cast<int>(sizes_.size())) direction_ = kDone;
}

}  // namespace joule
