// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Measured sample responses kept per GPU model and driver, so that a
// response measured once (joule.torch.measure_sample_response) is used by
// every later attribution on that model and driver, and a driver update,
// which may change how the driver samples, asks for a new one.
//
// One JSON file per model and driver in a directory (default_dir()),
// written whole or not at all; every number read back is checked, and a file
// that fails a check is refused with its path and what is wrong, never used.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "joule/attribution/window.h"

namespace joule::attribution {

// What a response belongs to: the GPU's name and its driver's version, as
// the driver reports them.
struct GpuModel {
  std::string name;
  std::string driver_version;
};

class SampleResponseStore {
 public:
  // $JOULE_SAMPLE_RESPONSE_DIR, else $XDG_CACHE_HOME/joule/sample-response,
  // else $HOME/.cache/joule/sample-response.
  static std::filesystem::path default_dir();

  explicit SampleResponseStore(std::filesystem::path dir = default_dir()) : dir_(std::move(dir)) {}

  // Keeps response for gpu (replacing one kept before), with measured_at (an
  // ISO 8601 time) as when it was measured. UsageError for a response that
  // fails the checks a load makes, Error where the file cannot be written.
  void save(const GpuModel& gpu, const SampleResponse& response, const std::string& measured_at) const;
  // The response kept for gpu, its source naming the model, driver and when
  // it was measured; none if none is kept. UsageError naming the file for
  // one that cannot be read or fails a check.
  std::optional<SampleResponse> load(const GpuModel& gpu) const;
  // The drivers a response is kept for with this GPU name, sorted.
  std::vector<std::string> drivers_for(const std::string& gpu_name) const;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path_for(const GpuModel& gpu) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace joule::attribution
