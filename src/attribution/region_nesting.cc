// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/region_nesting.h"

#include <algorithm>
#include <iterator>

namespace joule::attribution {

void RegionNesting::note(const std::string& key, const std::string& text) {
  if (noted_.insert(key).second) notes_.push_back(text);
}

void RegionNesting::edge(bool begin, const std::string& name) {
  begin ? sink_.begin(name) : sink_.end(name);
  last_was_begin_ = begin;
  last_name_ = name;
}

void RegionNesting::begin(const std::string& name, bool outside_backward) {
  if (backward_ && outside_backward) abandon_backward();
  push(name);
}

void RegionNesting::push(const std::string& name) {
  if (std::find(open_.begin(), open_.end(), name) != open_.end()) {
    note("reopened " + name, name + ": began again while still open; the open call was closed");
    end(name);
  }
  edge(true, name);
  open_.push_back(name);
}

void RegionNesting::end(const std::string& name) {
  if (!open_.empty() && open_.back() == name) {  // the innermost: every hook's end but a late one
    edge(false, name);
    open_.pop_back();
    return;
  }
  const auto at = std::find(open_.begin(), open_.end(), name);
  if (at == open_.end()) {
    note("not open " + name, name + ": ended without having begun; that edge was skipped");
    return;
  }
  const std::vector<std::string> inner(std::next(at), open_.end());
  if (inner.size() == 1 && last_was_begin_ && last_name_ == inner.front() && sink_.end_before_last(name)) {
    // The one inside began at the last edge, with no work since: this end
    // was found late (torch ran the begin's hook first on the same gradient)
    // and goes just before it.
    open_.erase(at);
    return;
  }
  if (!inner.empty()) {  // interleaved: autograd ran branches around each other
    std::string names;
    for (const std::string& other : inner) names += (names.empty() ? "" : ", ") + other;
    note("interleaved " + name, name + " ended while " + names +
                                    " inside it ran: those were closed and begun again (each such call counts twice)");
  }
  for (auto other = inner.rbegin(); other != inner.rend(); ++other) {
    edge(false, *other);
    open_.pop_back();
  }
  edge(false, name);
  open_.pop_back();
  for (const std::string& other : inner) {
    edge(true, other);
    open_.push_back(other);
  }
}

bool RegionNesting::begin_backward(const std::string& name, std::optional<std::int64_t> pass) {
  if (backward_ && pass != backward_pass_) abandon_backward();
  if (backward_ == name) return false;  // a call with several outputs: at the first
  const bool first = !backward_;
  if (first) {
    backward_pass_ = pass;
  } else if (!open_.empty() && open_.back() == *backward_ &&
             std::find(open_.begin(), open_.end(), name) == open_.end()) {
    // The common case: the open one is innermost, this one is not open: one
    // instant for both edges.
    sink_.end_and_begin(*backward_, name);
    open_.back() = name;
    last_was_begin_ = true;
    last_name_ = name;
    backward_ = name;
    return false;
  } else {
    end(*backward_);
  }
  backward_ = name;
  push(name);
  return first;
}

void RegionNesting::end_backward() {
  if (!backward_) return;
  const std::string name = std::move(*backward_);
  backward_.reset();
  end(name);
}

void RegionNesting::abandon_backward() {
  note("abandoned backward",
       *backward_ + ": its backward pass did not finish (an exception?); the region ended at the next edge");
  end_backward();
}

void RegionNesting::close_all() {
  backward_.reset();
  while (!open_.empty()) {
    const std::string name = open_.back();
    note("left open " + name, name + ": still open when the session ended; closed there");
    end(name);
  }
}

}  // namespace joule::attribution
