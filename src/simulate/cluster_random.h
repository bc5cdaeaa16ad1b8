// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A small, portable random source for the cluster generator and replay:
// 8 bytes of state (there may be a generator per group, tens of thousands),
// and the same numbers on every standard library, unlike std distributions.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace joule {

// SplitMix64 (Steele, Lea and Flood): one 64-bit state, full period.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }
  double normal() {  // Box-Muller; one of the pair is dropped to keep the state one word
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// FNV-1a of a text, to seed a group's streams from its id.
inline uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace joule
