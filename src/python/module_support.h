// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What the Python module's binding files share (private to src/python):
// the Monitor as Python holds it, text from outside made valid for Python,
// and each part's binding function, called in order by joule_module.cc.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/attribution/gpu_edge_clock.h"
#include "joule/attribution/region_nesting.h"
#include "joule/control/devices.h"
#include "joule/measure/monitor.h"

namespace joule::python {

namespace py = pybind11;

// The devices backend/sim/gpus name (joule.Monitor's and joule.devices'
// arguments); with backend auto and no driver, a RuntimeWarning that the GPUs
// are simulated.
joule::Devices open_devices(const std::string& backend, const std::string& sim, const std::vector<unsigned>& gpus);

// Text from outside (a driver's GPU name or error, a path, a warning that
// quotes them) on its way to a Python str: pybind11 decodes strict UTF-8 and
// would raise UnicodeDecodeError instead of giving the dict or error. Valid
// text is kept as it is; other bytes are shown as printable() shows them.
std::string outside_text(const std::string& text);
std::vector<std::string> outside_text(const std::vector<std::string>& texts);

// A number in a repr to `digits` significant digits ("nan" for NaN).
std::string repr_number(double x, int digits);

// JSON as Python objects (dict, list, ...), through the json module.
py::object python_of(const nlohmann::json& json);

// The C++ clock inside edges where it is a joule.GpuEdgeClock, else null
// (attribution_binding.cc).
joule::attribution::GpuEdgeClock* native_edge_sink(const py::handle& edges);
// Whether edges is a joule.GpuEdgeClock whose edges run no Python
// (CudaRuntimeEvents with the stream from PyTorch's C shim): any thread may
// then record one without the GIL.
bool edges_run_no_python(const py::handle& edges);

// A Monitor over the devices it found, owning both.
class PyMonitor {
 public:
  PyMonitor(const std::string& backend, const std::string& sim, const std::vector<unsigned>& gpus, double interval_ms,
            std::optional<py::function> synchronize)
      : PyMonitor(open_devices(backend, sim, gpus), interval_ms, std::move(synchronize)) {}
  PyMonitor(joule::Devices devices, double interval_ms, std::optional<py::function> synchronize)
      : devices_(std::move(devices)) {
    joule::MonitorOptions options;
    options.sampler.interval_s = joule::sampling_interval_s(interval_ms);
    // Whether the power limit holds the clocks (1.5 us a read on an H200,
    // dropped for a GPU that cannot tell): attribution says when a window
    // ran mostly at the cap.
    options.sampler.fields.power_cap = true;
    if (synchronize) {
      // Called from begin/end_window, which keep the GIL (below); taken
      // again in case a C++ caller released it.
      auto fn = std::make_shared<py::function>(*synchronize);
      options.synchronize = [fn] {
        py::gil_scoped_acquire gil;
        (*fn)();
      };
      synchronize_ = fn;
      synchronize_call_ = options.synchronize;
    }
    monitor_ = std::make_unique<joule::Monitor>(devices_, options);
  }
  ~PyMonitor() {
    py::gil_scoped_release release;
    monitor_.reset();
  }
  joule::Monitor& monitor() { return *monitor_; }
  const joule::Devices& devices() const { return devices_; }
  // The caller's synchronize (taking the GIL around the Python call), or empty.
  const std::function<void()>& synchronize() const { return synchronize_call_; }

 private:
  joule::Devices devices_;
  std::shared_ptr<py::function> synchronize_;
  std::function<void()> synchronize_call_;
  std::unique_ptr<joule::Monitor> monitor_;
};

}  // namespace joule::python

// Each part of joule._joule, bound in this order (types a later part's
// signatures name are bound first).
void bind_carbon(pybind11::module_& m);        // carbon_binding.cc: joule.Carbon, joule.carbon_regions
void bind_attribution(pybind11::module_& m);   // attribution_binding.cc: regions and their energy
void bind_optimizers(pybind11::module_& m);    // optimizer_binding.cc: the power-limit and batch-size optimizers
void bind_cluster(pybind11::module_& m);       // cluster_binding.cc: one job on many nodes
void bind_torch_hooks(pybind11::module_& m);   // torch_hooks_binding.cc: joule.torch's hooks, in C++
