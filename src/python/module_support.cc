// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "module_support.h"

#include <cmath>
#include <sstream>

#include "joule/common/utf8.h"
#include "joule/device/discovery.h"

namespace joule::python {

joule::Devices open_devices(const std::string& backend, const std::string& sim, const std::vector<unsigned>& gpus) {
  joule::DiscoveryOptions options;
  options.backend = joule::parse_gpu_backend(backend);
  options.sim_spec = sim;
  joule::Devices devices = joule::discover_devices(options);
  if (!gpus.empty()) joule::select_gpus(devices, gpus);
  // Asked for the real GPUs and given made-up ones (no driver): say so, as
  // joule measure does, rather than let a script report simulated joules.
  if (options.backend == joule::GpuBackend::kAuto && devices.simulated()) {
    const std::string why = "joule: GPUs are SIMULATED (" + devices.gpu_backend_reason + ")";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, why.c_str(), 1) != 0) throw py::error_already_set();
  }
  return devices;
}

std::string outside_text(const std::string& text) { return joule::valid_utf8_or_printable(text); }

std::vector<std::string> outside_text(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  out.reserve(texts.size());
  for (const auto& text : texts) out.push_back(outside_text(text));
  return out;
}

std::string repr_number(double x, int digits) {
  if (std::isnan(x)) return "nan";
  std::ostringstream out;
  out.precision(digits);
  out << x;
  return out.str();
}

py::object python_of(const nlohmann::json& json) { return py::module_::import("json").attr("loads")(json.dump()); }

}  // namespace joule::python
