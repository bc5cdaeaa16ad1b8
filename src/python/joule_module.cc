// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The `joule` Python module (as joule._joule): its errors, the devices, the
// Monitor and its Measurements here; the other parts in their binding files
// (module_support.h lists them: carbon, attribution, the optimizers, one job
// on many nodes). Anything that may wait (driver calls, the sampler) runs
// with the GIL released; exceptions keep their messages.
#include "module_support.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/device/power_limit_facts.h"
#include "joule/device/sim.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "joule/version.h"

namespace py = pybind11;
using namespace pybind11::literals;

using joule::python::open_devices;
using joule::python::outside_text;
using joule::python::PyMonitor;

namespace {

// What each driver library gave: where it was looked for, whether it loaded
// and, where it gave no GPU, why (NVML for NVIDIA GPUs, ROCm SMI for AMD ones).
py::dict driver_info(const joule::Devices& devices) {
  return py::dict("gpu_backend"_a = devices.gpu_backend, "gpu_backend_reason"_a = outside_text(devices.gpu_backend_reason),
                  "nvml_library"_a = outside_text(devices.nvml_library), "nvml_loaded"_a = devices.nvml_loaded,
                  "nvml_problem"_a = outside_text(devices.nvml_problem),
                  "driver_version"_a = outside_text(devices.driver_version),
                  "nvml_missing_functions"_a = outside_text(devices.nvml_missing_functions),
                  "rocm_library"_a = outside_text(devices.rocm_library), "rocm_loaded"_a = devices.rocm_loaded,
                  "rocm_problem"_a = outside_text(devices.rocm_problem),
                  "rocm_version"_a = outside_text(devices.rocm_version),
                  "rocm_missing_functions"_a = outside_text(devices.rocm_missing_functions));
}

// vendor_index: the GPU's number among its vendor's, as CUDA_VISIBLE_DEVICES
// (NVIDIA) or HIP_VISIBLE_DEVICES (AMD, backend "rocm") count them.
py::dict gpu_info(joule::Gpu& gpu, const joule::Devices& devices) {
  py::dict info("index"_a = gpu.index(), "name"_a = outside_text(gpu.name()), "uuid"_a = outside_text(gpu.uuid()),
                "architecture"_a = outside_text(gpu.architecture()), "backend"_a = gpu.backend(),
                "vendor_index"_a = joule::vendor_index(devices, gpu), "simulated"_a = gpu.simulated(),
                "energy_method"_a = outside_text(joule::explain_energy_method(gpu, joule::SamplerOptions{})));
  // A fact the driver refuses is None, and why is in power_limit_error.
  const joule::PowerLimitFacts limits = joule::read_power_limit_facts(gpu);
  auto watts = [](const std::optional<double>& w) { return w ? py::object(py::float_(*w)) : py::object(py::none()); };
  info["power_limit_w"] = watts(limits.limit_w);
  info["default_limit_w"] = watts(limits.default_w);
  info["min_limit_w"] = watts(limits.min_w);
  info["max_limit_w"] = watts(limits.max_w);
  info["power_limit_error"] = limits.errors.empty() ? py::object(py::none()) : py::object(py::str(outside_text(limits.error_text())));
  py::dict capabilities;
  for (const auto& c : gpu.probe_capabilities()) {
    capabilities[joule::to_string(c.capability)] = py::make_tuple(c.available, outside_text(c.reason));
  }
  info["capabilities"] = capabilities;
  return info;
}

// A UsageError naming the call (`what`) where the monitor has no GPU `gpu`.
void require_gpu(const joule::Monitor& monitor, std::size_t gpu, const char* what) {
  if (gpu >= monitor.gpus().size()) {
    throw joule::UsageError(std::string(what) + ": GPU " + std::to_string(gpu) + " does not exist (the monitor has " +
                            std::to_string(monitor.gpus().size()) + ")");
  }
}

// The simulated GPUs `gpu` names (all when none), every one checked before
// any load changes: a real GPU is never touched, and a mix is refused whole.
std::vector<joule::SimGpu*> simulated_gpus(const joule::Monitor& monitor, std::optional<std::size_t> gpu) {
  const auto& gpus = monitor.gpus();
  if (gpu) require_gpu(monitor, *gpu, "set_simulated_load");
  std::vector<joule::SimGpu*> out;
  for (std::size_t i = gpu.value_or(0); i < (gpu ? *gpu + 1 : gpus.size()); ++i) {
    auto* sim = dynamic_cast<joule::SimGpu*>(gpus[i].get());
    if (sim == nullptr) {
      throw joule::UsageError("set_simulated_load: GPU " + std::to_string(i) + " (" + gpus[i]->name() +
                              ") is on backend '" + gpus[i]->backend() +
                              "', not simulated: only backend=\"sim\" GPUs take a load");
    }
    out.push_back(sim);
  }
  return out;
}

// [begin_s, end_s] computed like an ended window with those edges, from what
// the sampler holds now (Measurement::settled once the data covers end_s).
joule::Measurement measure_span(PyMonitor& self, double begin_s, double end_s, const std::string& name) {
  joule::Measurement span;
  span.name = name;
  span.begin_s = begin_s;
  span.elapsed_s = std::max(0.0, end_s - begin_s);
  return self.monitor().refresh(span);
}

}  // namespace

PYBIND11_MODULE(_joule, m) {
  m.doc() = "joule: measure and lower the energy of deep-learning training on GPUs";
  m.attr("__version__") = joule::version();

  static py::exception<joule::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<joule::UsageError> usage_error(m, "UsageError", error.ptr());
  static py::exception<joule::DeviceError> device_error(m, "DeviceError", error.ptr());
  // A message may quote a driver's or a file's bytes: raised as the joule
  // error it is, its text made valid (PyErr_SetString would raise a
  // UnicodeDecodeError in its place).
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const joule::UsageError& e) {
      PyErr_SetString(usage_error.ptr(), outside_text(e.what()).c_str());
    } catch (const joule::DeviceError& e) {
      PyErr_SetString(device_error.ptr(), outside_text(e.what()).c_str());
    } catch (const joule::Error& e) {
      PyErr_SetString(error.ptr(), outside_text(e.what()).c_str());
    }
  });
  bind_carbon(m);

  m.def(
      "devices",
      [](const std::string& backend, const std::string& sim) {
        joule::Devices devices = open_devices(backend, sim, {});
        py::list gpus;
        for (const auto& gpu : devices.gpus) gpus.append(gpu_info(*gpu, devices));
        py::list zones;
        for (const auto& zone : devices.cpu_zones) zones.append(outside_text(zone->label()));
        py::dict info = driver_info(devices);
        info["simulated"] = devices.simulated();
        info["control_path"] = outside_text(devices.control_path);
        info["gpus"] = gpus;
        info["cpu_zones"] = zones;
        info["cpu_problems"] = outside_text(devices.cpu_problems);
        return info;
      },
      "backend"_a = "auto", "sim"_a = "",
      "Every device joule finds, what it can read and how limits would change; backend: auto, nvml, rocm or sim.");

  py::class_<joule::GpuEnergySource>(m, "GpuEnergySource")
      .def_property_readonly("method", [](const joule::GpuEnergySource& x) { return joule::to_string(x.method); })
      .def_readonly("calibration_scale", &joule::GpuEnergySource::calibration_scale)
      .def_readonly("counter_anchored", &joule::GpuEnergySource::counter_anchored)
      .def("__repr__", [](const joule::GpuEnergySource& x) {
        return std::string("<GpuEnergySource ") + joule::to_string(x.method) + " x" +
               std::to_string(x.calibration_scale) + (x.counter_anchored ? ", counter-anchored>" : ">");
      });

  py::class_<joule::Measurement>(m, "Measurement")
      .def_readonly("name", &joule::Measurement::name)
      .def_readonly("begin_s", &joule::Measurement::begin_s)
      .def_readonly("elapsed_s", &joule::Measurement::elapsed_s)
      .def_property_readonly("end_s", &joule::Measurement::end_s)
      .def_readonly("settled", &joule::Measurement::settled)
      .def_readonly("gpu_sources", &joule::Measurement::gpu_sources)
      .def_readonly("gpu_energy_j", &joule::Measurement::gpu_energy_j)
      .def_readonly("cpu_package_energy_j", &joule::Measurement::cpu_package_energy_j)
      .def_readonly("dram_energy_j", &joule::Measurement::dram_energy_j)
      .def_property_readonly("warnings", [](const joule::Measurement& x) { return outside_text(x.warnings); })
      .def_property_readonly("gpu_total_energy_j", &joule::Measurement::gpu_total_energy_j)
      .def_property_readonly("total_energy_j", &joule::Measurement::total_energy_j)
      .def("__repr__", [](const joule::Measurement& x) {
        return "<Measurement '" + x.name + "' " + std::to_string(x.elapsed_s) + " s, " +
               std::to_string(x.total_energy_j()) + " J" + (x.settled ? "" : ", not settled") + ">";
      });

  py::class_<PyMonitor>(m, "Monitor")
      .def(py::init<const std::string&, const std::string&, const std::vector<unsigned>&, double,
                    std::optional<py::function>>(),
           "backend"_a = "auto", "sim"_a = "", "gpus"_a = std::vector<unsigned>{}, "interval_ms"_a = 100.0,
           "synchronize"_a = py::none())
      .def(
          "energy_method", [](PyMonitor& self, std::size_t gpu) {
            require_gpu(self.monitor(), gpu, "energy_method");
            return outside_text(self.monitor().sampler().gpu_method_description(gpu));
          },
          "gpu"_a, "How the monitor obtains GPU gpu's energy, in words (the method joule measure prints): whether "
          "its windows are pinned to counter steps yet, and if not, why.")
      .def(
          "read_counter_every_step",
          [](PyMonitor& self, bool on) { self.monitor().sampler().read_counter_every_step(on); }, "on"_a,
          "While on, every GPU whose windows are pinned to its energy counter's steps has the counter read once a "
          "step (~10 reads a second, ~4% of a core on an H100), and joule.attribute fits the counter's increments "
          "with the samples. Counted: each True wants its own False.")
      // The edges keep the GIL: they take a microsecond and wait for no
      // driver call (the sampling threads, which never take the GIL, make
      // them), and releasing and taking it back would cost more than the
      // window. Calls that wait (settle, end_window_settled) release it.
      .def(
          "begin_window", [](PyMonitor& self, const std::string& name) { self.monitor().begin_window(name); },
          "name"_a)
      .def(
          "end_window", [](PyMonitor& self, const std::string& name) { return self.monitor().end_window(name); },
          "name"_a)
      .def(
          "settle",
          [](PyMonitor& self, const joule::Measurement& ended, double timeout_s) {
            return self.monitor().settle(ended, timeout_s);
          },
          "measurement"_a, "timeout_s"_a = 1.0, py::call_guard<py::gil_scoped_release>(),
          "The final value of an ended window: waits up to timeout_s for the data that covers its end.")
      .def(
          "refresh", [](PyMonitor& self, const joule::Measurement& ended) { return self.monitor().refresh(ended); },
          "measurement"_a, py::call_guard<py::gil_scoped_release>(),
          "Computes an ended window again from what the sampler holds now (no waiting).")
      .def(
          "clock_s", [](PyMonitor& self) { return self.monitor().sampler().clock().now_s(); },
          "The monitor's clock, in seconds: the one Measurement.begin_s and end_s are on.")
      .def_property_readonly(
          "monotonic_offset_s",
          [](PyMonitor& self) -> std::optional<double> {
            // The steady clock is CLOCK_MONOTONIC from the process's start, as
            // time.monotonic() is from boot: one offset maps one onto the other,
            // so a framework callback reads an edge with no call into this module
            // (the first such call after a step of framework code costs 10-15 us).
            const joule::Clock& clock = self.monitor().sampler().clock();
            if (clock.is_virtual()) return std::nullopt;
            const double monotonic_s =
                std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
            return monotonic_s - clock.now_s();
          },
          "clock_s() == time.monotonic() - monotonic_offset_s (to a microsecond), or None for a virtual clock.")
      .def(
          "measure_since",
          [](PyMonitor& self, double begin_s, const std::string& name) {
            // A running estimate (issue 33: joule.window's energy_so_far_j): the span
            // [begin_s, now] computed like an ended window, without ending anything.
            return measure_span(self, begin_s, self.monitor().sampler().clock().now_s(), name);
          },
          "begin_s"_a, "name"_a = "", py::call_guard<py::gil_scoped_release>(),
          "The devices' energy from begin_s (on clock_s()'s clock) to now, from what the sampler holds now (no "
          "waiting, not settled): a running estimate for a window still open, whose beginning keeps the history.")
      .def("measure_span", &measure_span, "begin_s"_a, "end_s"_a, "name"_a = "",
           py::call_guard<py::gil_scoped_release>(),
           "The devices' energy over [begin_s, end_s] (clock_s()'s clock) from what the sampler holds now, like "
           "refresh() of a window with those edges (settled once the data covers end_s), without opening one: "
           "spans laid end to end at two clock reads each (joule's framework callbacks, a window per step). The "
           "history must still hold begin_s: a window open since before it keeps it.")
      .def(
          "measure_spans",
          [](PyMonitor& self, const std::vector<double>& begins_s, const std::vector<double>& ends_s) {
            // One call for a poll's worth of spans: a framework callback settles
            // tens at once, and a Measurement object each cost tens of
            // microseconds in a training process.
            if (begins_s.size() != ends_s.size()) {
              throw joule::UsageError("measure_spans: " + std::to_string(begins_s.size()) + " begins but " +
                                      std::to_string(ends_s.size()) + " ends");
            }
            std::vector<double> energies_j;
            for (std::size_t i = 0; i < begins_s.size(); ++i) {
              const joule::Measurement span = measure_span(self, begins_s[i], ends_s[i], {});
              if (!span.settled) break;
              energies_j.push_back(span.gpu_total_energy_j());
            }
            return energies_j;
          },
          "begins_s"_a, "ends_s"_a, py::call_guard<py::gil_scoped_release>(),
          "The GPU energy (J) of each span [begins_s[i], ends_s[i]] (clock_s()'s clock), in order, up to the "
          "first whose data does not cover its end yet: measure_span's gpu_total_energy_j for each, as numbers.")
      .def_property_readonly(
          "synchronizes", [](const PyMonitor& self) { return static_cast<bool>(self.synchronize()); },
          "Whether window edges wait for queued device work (made with synchronize=).")
      .def(
          "synchronize",
          [](PyMonitor& self) {
            if (self.synchronize()) self.synchronize()();
          },
          py::call_guard<py::gil_scoped_release>(),
          "Waits as a window edge does (the synchronize= callable); nothing where there is none.")
      .def(
          "end_window_settled",
          [](PyMonitor& self, const std::string& name, double timeout_s) {
            return self.monitor().end_window_settled(name, timeout_s);
          },
          "name"_a, "timeout_s"_a = 1.0, py::call_guard<py::gil_scoped_release>())
      .def(
          "window",
          [](py::object self, const std::string& name, const py::kwargs& options) {
            // One window type for Python (joule.Window, python/joule/meter.py): the
            // same reading API here as from joule.window(), under the name given.
            // Edges as the monitor was made (its synchronize), as they always were.
            return py::module_::import("joule.meter").attr("Window")(name, self, **options, "exact_name"_a = true,
                                                                      "cuda_sync"_a = false);
          },
          "name"_a = "window",
          "A joule.Window on this monitor, named exactly `name`: `with monitor.window(\"epoch\") as w:` ..., then "
          "w.energy_j, w.elapsed_s, w.gpu_energy_j, w.measurement (settled). Options as joule.window's.")
      .def(
          "write_timeline_csv", [](PyMonitor& self, const std::string& path) { self.monitor().timeline().write_csv(path); },
          "path"_a, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("gpus", [](PyMonitor& self) {
        py::list gpus;
        for (const auto& gpu : self.monitor().gpus()) gpus.append(gpu_info(*gpu, self.devices()));
        return gpus;
      })
      .def_property_readonly("drivers", [](const PyMonitor& self) { return driver_info(self.devices()); })
      .def_property_readonly("simulated", [](const PyMonitor& self) { return self.devices().simulated(); })
      .def(
          "observed_power",
          [](PyMonitor& self, std::size_t gpu, double begin_s, double end_s) {
            require_gpu(self.monitor(), gpu, "observed_power");
            py::list out;
            for (const auto& o : self.monitor().sampler().observed_power(gpu, begin_s, end_s)) {
              out.append(py::make_tuple(o.begin_s, o.end_s, o.power_w));
            }
            return out;
          },
          "gpu"_a, "begin_s"_a, "end_s"_a,
          "The power data a GPU's energy over [begin_s, end_s] comes from, as (begin_s, end_s, power_w) "
          "tuples on the monitor's clock: each driver sample's span, or each sampled interval. What "
          "joule.attribute fits; for your own analysis.")
      .def(
          "counter_values",
          [](PyMonitor& self, std::size_t gpu, double begin_s, double end_s) {
            require_gpu(self.monitor(), gpu, "counter_values");
            py::list out;
            for (const auto& v : self.monitor().sampler().counter_values(gpu, begin_s, end_s)) {
              out.append(py::make_tuple(v.step_s, v.counter_j));
            }
            return out;
          },
          "gpu"_a, "begin_s"_a, "end_s"_a,
          "The GPU's energy-counter values read within [begin_s, end_s], as (time_s, energy_j) tuples on the "
          "monitor's clock, each at the counter step it shows (once a step while read_counter_every_step is on; "
          "otherwise those read for window edges). The increments joule.attribute fits; for your own analysis.")
      .def(
          "set_simulated_load",
          [](PyMonitor& self, double load, std::optional<std::size_t> gpu) {
            const auto gpus = simulated_gpus(self.monitor(), gpu);
            // The load is checked by the first set_load, before any GPU changes.
            for (joule::SimGpu* sim : gpus) sim->set_load(load);
          },
          "load"_a, "gpu"_a = py::none(),
          "Sets the load (the busy fraction, 0 to 1) of a simulated GPU, or of all when gpu is None, from now "
          "on: it then draws idle_w + load * (full_w - idle_w) (the sim spec's figures) under its limit. "
          "Set it as a region begins to give each region its own power, e.g. to try joule.attribute "
          "without a GPU (sim spec sample_ms=20 adds driver-like 20 ms power samples). UsageError for a "
          "load outside [0, 1] or not finite, and for a GPU that is not simulated (nothing is changed then).");

  bind_attribution(m);  // after Monitor and Measurement, which its signatures name
  bind_torch_hooks(m);
  bind_optimizers(m);
  bind_cluster(m);
}
