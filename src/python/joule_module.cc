// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The `joule` Python module (as joule._joule): measurement, the power-limit
// optimizer with the same callbacks as C++, the batch-size optimizer and
// device information, and the per-node parts of a job measured on many nodes
// (joule.distributed moves them over torch.distributed). Anything that may
// wait (driver calls, the sampler) runs with the GIL released; exceptions
// keep their messages.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "joule/analyze/attribution_report.h"
#include "joule/attribution/attribution.h"
#include "joule/attribution/regions.h"
#include "joule/attribution/window.h"
#include "joule/cluster/node_report.h"
#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/device/power_limit_facts.h"
#include "joule/device/sim.h"
#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/power_limit_optimizer.h"
#include "joule/version.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

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

// Text from outside (a driver's GPU name or error, a path, a warning that
// quotes them) on its way to a Python str: pybind11 decodes strict UTF-8 and
// would raise UnicodeDecodeError instead of giving the dict or error. Valid
// text is kept as it is; other bytes are shown as printable() shows them.
std::string outside_text(const std::string& text) { return joule::valid_utf8_or_printable(text); }

std::vector<std::string> outside_text(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  out.reserve(texts.size());
  for (const auto& text : texts) out.push_back(outside_text(text));
  return out;
}

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

// The simulated GPUs `gpu` names (all when none), every one checked before
// any load changes: a real GPU is never touched, and a mix is refused whole.
std::vector<joule::SimGpu*> simulated_gpus(const joule::Monitor& monitor, std::optional<std::size_t> gpu) {
  const auto& gpus = monitor.gpus();
  if (gpu && *gpu >= gpus.size()) {
    throw joule::UsageError("set_simulated_load: GPU " + std::to_string(*gpu) + " does not exist (the monitor has " +
                            std::to_string(gpus.size()) + ")");
  }
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

// [begin_s, end_s] computed like an ended window with those edges, from what
// the sampler holds now (Measurement::settled once the data covers end_s).
joule::Measurement measure_span(PyMonitor& self, double begin_s, double end_s, const std::string& name) {
  joule::Measurement span;
  span.name = name;
  span.begin_s = begin_s;
  span.elapsed_s = std::max(0.0, end_s - begin_s);
  return self.monitor().refresh(span);
}

// Regions on a Monitor's clock (joule.RegionRecorder), which it shares.
class PyRegionRecorder {
 public:
  explicit PyRegionRecorder(PyMonitor& monitor)
      : synchronized_(static_cast<bool>(monitor.synchronize())),
        clock_(monitor.monitor().sampler().shared_clock()),
        recorder_(clock_, monitor.synchronize()) {}
  // With a synchronize, an edge waits for the GPU: release the GIL (the
  // synchronize takes it back for the Python call). Without, an edge is a
  // clock read: keep it.
  // at_s: an instant measured elsewhere (a CUDA event's, mapped to this
  // clock): no synchronize, no clock read.
  // concurrent: a call of a concurrent region (RegionRecorder's
  // begin_concurrent_at: beside the nesting, in any order, calls may overlap).
  void begin(const std::string& name, std::optional<double> at_s, bool concurrent) {
    if (at_s) return concurrent ? recorder_.begin_concurrent_at(name, *at_s) : recorder_.begin_at(name, *at_s);
    edge([&] { concurrent ? recorder_.begin_concurrent(name) : recorder_.begin(name); });
  }
  void end(const std::string& name, std::optional<double> at_s, bool concurrent) {
    if (at_s) return concurrent ? recorder_.end_concurrent_at(name, *at_s) : recorder_.end_at(name, *at_s);
    edge([&] { concurrent ? recorder_.end_concurrent(name) : recorder_.end(name); });
  }
  double clock_s() const { return clock_->now_s(); }
  const joule::attribution::RegionRecorder& recorder() const { return recorder_; }
  bool synchronized() const { return synchronized_; }

 private:
  template <typename Fn>
  void edge(Fn&& fn) {
    if (!synchronized_) return fn();
    py::gil_scoped_release release;
    fn();
  }

  bool synchronized_;
  std::shared_ptr<const joule::Clock> clock_;
  joule::attribution::RegionRecorder recorder_;
};

// `with recorder.region("data"):` ...
class PyRegion {
 public:
  PyRegion(PyRegionRecorder& recorder, std::string name) : recorder_(recorder), name_(std::move(name)) {}
  PyRegion& enter() {
    recorder_.begin(name_, std::nullopt, false);
    return *this;
  }
  bool exit(const py::object&, const py::object&, const py::object&) {
    recorder_.end(name_, std::nullopt, false);
    return false;  // exceptions propagate
  }
  const std::string& name() const { return name_; }

 private:
  PyRegionRecorder& recorder_;
  std::string name_;
};

py::dict region_energy_dict(const joule::attribution::RegionEnergy& r) {
  return py::dict("name"_a = r.name, "concurrent"_a = r.concurrent, "calls"_a = r.calls, "gpu_time_s"_a = r.gpu_time_s, "resolved"_a = r.resolved,
                  "power_w"_a = r.power_w, "power_above_baseline_w"_a = r.power_above_baseline_w,
                  "energy_j"_a = r.energy_j, "energy_per_call_j"_a = r.energy_per_call_j, "share"_a = r.share,
                  "energy_low_j"_a = r.energy_low_j, "energy_high_j"_a = r.energy_high_j,
                  "energy_std_j"_a = r.energy_std_j);
}

py::dict attribution_dict(const joule::attribution::Attribution& a) {
  py::list regions;
  for (const auto& r : a.regions) regions.append(region_energy_dict(r));
  return py::dict("regions"_a = regions, "baseline_w"_a = a.baseline_w, "baseline_low_w"_a = a.baseline_low_w,
                  "baseline_high_w"_a = a.baseline_high_w, "baseline_estimated"_a = a.baseline_estimated,
                  "baseline_separated"_a = a.baseline_separated, "idle_time_s"_a = a.idle_time_s,
                  "idle_energy_j"_a = a.idle_energy_j, "window_energy_j"_a = a.window_energy_j,
                  "model_energy_j"_a = a.model_energy_j, "scale"_a = a.scale, "observations"_a = a.observations,
                  "residual_rms_w"_a = a.residual_rms_w, "notes"_a = a.notes, "simulated"_a = a.simulated);
}

std::string repr_number(double x, int digits) {
  if (std::isnan(x)) return "nan";
  std::ostringstream out;
  out.precision(digits);
  out << x;
  return out.str();
}

py::list profile_rows(const std::vector<joule::PowerLimitProfileRow>& rows) {
  py::list out;
  for (const auto& r : rows) {
    out.append(py::dict("power_limit_w"_a = r.power_limit_w, "steps"_a = r.steps,
                        "time_per_step_s"_a = r.time_per_step_s, "energy_per_step_j"_a = r.energy_per_step_j,
                        "avg_power_w"_a = r.avg_power_w, "clock_mhz"_a = r.clock_mhz));
  }
  return out;
}

// Rows as `profile` gives them; steps and avg_power_w may be left out.
std::vector<joule::PowerLimitProfileRow> profile_rows_from(const py::list& rows) {
  std::vector<joule::PowerLimitProfileRow> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto row = rows[i].cast<py::dict>();
    auto number = [&](const char* key) {
      if (!row.contains(key)) {
        throw joule::UsageError("known_profile row " + std::to_string(i) + ": no '" + key + "'");
      }
      return row[key].cast<double>();
    };
    joule::PowerLimitProfileRow r;
    r.power_limit_w = number("power_limit_w");
    r.time_per_step_s = number("time_per_step_s");
    r.energy_per_step_j = number("energy_per_step_j");
    r.steps = row.contains("steps") ? row["steps"].cast<int>() : 0;
    r.avg_power_w = row.contains("avg_power_w") ? number("avg_power_w") : r.energy_per_step_j / r.time_per_step_s;
    out.push_back(r);
  }
  return out;
}

// on_profiled runs on the training thread with the GIL released: take it back.
std::function<void(const std::vector<joule::PowerLimitProfileRow>&)> profiled_callback(const py::function& fn) {
  auto held = std::make_shared<py::function>(fn);
  return [held](const std::vector<joule::PowerLimitProfileRow>& rows) {
    py::gil_scoped_acquire gil;
    (*held)(profile_rows(rows));
  };
}

// JSON as Python objects (dict, list, ...), through the json module.
py::object python_of(const nlohmann::json& json) { return py::module_::import("json").attr("loads")(json.dump()); }

// What rank 0 knows of one node's leader in a window: its rank, the node's
// name, the message it sent (None: nothing arrived) and why there is none.
using LeaderOutcomeTuple = std::tuple<int, std::string, std::optional<std::string>, std::string>;

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
  { void bind_carbon(py::module_&); bind_carbon(m); }  // joule.Carbon, joule.carbon_regions (carbon_binding.cc)

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
            if (gpu >= self.monitor().gpus().size()) {
              throw joule::UsageError("observed_power: GPU " + std::to_string(gpu) + " does not exist");
            }
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

  // Energy per region (issue 32): regions recorded on the monitor's clock,
  // attributed over a settled window from the sampler's power data.
  py::class_<PyRegion>(m, "Region")
      .def("__enter__", &PyRegion::enter, py::return_value_policy::reference)
      .def("__exit__", &PyRegion::exit)
      .def_property_readonly("name", &PyRegion::name)
      .def("__repr__", [](const PyRegion& r) { return "<Region '" + r.name() + "'>"; });

  py::class_<PyRegionRecorder>(m, "RegionRecorder")
      .def(py::init<PyMonitor&>(), "monitor"_a, py::keep_alive<1, 2>(),
           "Marks when regions of a training step run, on the monitor's clock. A region begun inside another "
           "pauses it until it ends. Edges are host instants unless the monitor was made with a synchronize, "
           "which then runs at every edge. One recorder per training thread.")
      .def("begin", &PyRegionRecorder::begin, "name"_a, "at_s"_a = py::none(), "concurrent"_a = false,
           "Begins region `name` now, or at at_s (seconds on clock_s()'s clock, measured elsewhere, e.g. a CUDA "
           "event mapped to it; edges come in the order they happened). concurrent=True: a call of a "
           "concurrent region (work on another stream, e.g. an all-reduce, whose power adds to whatever runs): "
           "it does not nest, its edges may come in any order relative to the others, and several of its "
           "calls may be open at once. A name is concurrent or not, always.")
      .def("end", &PyRegionRecorder::end, "name"_a, "at_s"_a = py::none(), "concurrent"_a = false,
           "Ends the innermost open region, which must be `name` (UsageError otherwise); at_s as begin's. "
           "concurrent=True: ends the earliest open call of concurrent region `name` (not before it began).")
      .def("clock_s", &PyRegionRecorder::clock_s, "The monitor's clock, in seconds: the one edges are on.")
      .def(
          "region", [](PyRegionRecorder& self, const std::string& name) { return PyRegion(self, name); }, "name"_a,
          py::keep_alive<0, 1>(), "A context manager: begin(name) on entry, end(name) on exit.")
      .def_property_readonly("names", [](const PyRegionRecorder& self) { return self.recorder().names(); })
      .def(
          "intervals",
          [](const PyRegionRecorder& self, double begin_s, double end_s) {
            py::list out;
            for (const auto& v : self.recorder().intervals_within(begin_s, end_s)) {
              out.append(py::make_tuple(self.recorder().names()[v.region], v.begin_s, v.end_s, v.resumed));
            }
            return out;
          },
          "begin_s"_a, "end_s"_a,
          "The recorded pieces of regions within [begin_s, end_s] (cut to it), as (name, begin_s, end_s, "
          "resumed) tuples in time order; a region nested in another pauses it (resumed: a later piece of "
          "the same call).")
      .def_property_readonly("open_regions",
                             [](const PyRegionRecorder& self) { return self.recorder().open_regions(); })
      .def_property_readonly(
          "open_concurrent_calls", [](const PyRegionRecorder& self) { return self.recorder().open_concurrent_calls(); })
      .def_property_readonly(
          "concurrent_regions",
          [](const PyRegionRecorder& self) {
            std::vector<std::string> out;
            for (std::size_t r = 0; r < self.recorder().names().size(); ++r) {
              if (self.recorder().is_concurrent(r)) out.push_back(self.recorder().names()[r]);
            }
            return out;
          },
          "The names recorded as concurrent, in order of first use.")
      .def_property_readonly("synchronized", &PyRegionRecorder::synchronized)
      .def("__repr__", [](const PyRegionRecorder& self) {
        return "<RegionRecorder " + std::to_string(self.recorder().names().size()) + " regions, " +
               std::to_string(self.recorder().open_regions()) + " open>";
      });

  using joule::attribution::Attribution;
  using joule::attribution::RegionEnergy;
  py::class_<RegionEnergy>(m, "RegionEnergy")
      .def_readonly("name", &RegionEnergy::name)
      .def_readonly("concurrent", &RegionEnergy::concurrent)
      .def_readonly("calls", &RegionEnergy::calls)
      .def_readonly("gpu_time_s", &RegionEnergy::gpu_time_s)
      .def_readonly("resolved", &RegionEnergy::resolved)
      .def_readonly("power_w", &RegionEnergy::power_w)
      .def_readonly("power_above_baseline_w", &RegionEnergy::power_above_baseline_w)
      .def_readonly("energy_j", &RegionEnergy::energy_j)
      .def_readonly("energy_per_call_j", &RegionEnergy::energy_per_call_j)
      .def_readonly("share", &RegionEnergy::share)
      .def_readonly("energy_low_j", &RegionEnergy::energy_low_j)
      .def_readonly("energy_high_j", &RegionEnergy::energy_high_j)
      .def_readonly("energy_std_j", &RegionEnergy::energy_std_j)
      .def("to_dict", &region_energy_dict)
      .def("__repr__", [](const RegionEnergy& r) {
        return "<RegionEnergy '" + r.name + "' " + std::to_string(r.calls) + " calls, " +
               repr_number(r.gpu_time_s, 4) + " s, " + repr_number(r.energy_j, 5) + " J (" +
               repr_number(100.0 * r.share, 3) + "%)" + (r.concurrent ? ", concurrent" : "") +
               (r.resolved ? "" : ", not resolved") + ">";
      });

  py::class_<Attribution>(m, "Attribution")
      .def_readonly("regions", &Attribution::regions)
      .def_readonly("baseline_w", &Attribution::baseline_w)
      .def_readonly("baseline_low_w", &Attribution::baseline_low_w)
      .def_readonly("baseline_high_w", &Attribution::baseline_high_w)
      .def_readonly("baseline_estimated", &Attribution::baseline_estimated)
      .def_readonly("baseline_separated", &Attribution::baseline_separated)
      .def_readonly("idle_time_s", &Attribution::idle_time_s)
      .def_readonly("idle_energy_j", &Attribution::idle_energy_j)
      .def_readonly("window_energy_j", &Attribution::window_energy_j)
      .def_readonly("model_energy_j", &Attribution::model_energy_j)
      .def_readonly("scale", &Attribution::scale)
      .def_readonly("observations", &Attribution::observations)
      .def_readonly("residual_rms_w", &Attribution::residual_rms_w)
      .def_readonly("notes", &Attribution::notes)
      .def_readonly("simulated", &Attribution::simulated)
      .def("to_dict", &attribution_dict, "Plain dicts, lists and floats (NaN kept), e.g. for json.dumps.")
      .def("__repr__", [](const Attribution& a) {
        return "<Attribution " + std::to_string(a.regions.size()) + " regions, " +
               repr_number(a.window_energy_j, 6) + " J, baseline " +
               (a.baseline_separated ? repr_number(a.baseline_w, 4) + " W" + (a.baseline_estimated ? "" : " (given)")
                                     : std::string("not separated")) +
               ", scale " + repr_number(a.scale, 4) + ", " + std::to_string(a.notes.size()) + " notes>";
      });

  using joule::attribution::SampleResponse;
  py::class_<SampleResponse>(m, "SampleResponse")
      .def(py::init([](std::vector<double> response_ms, int first_lag_ms, std::vector<std::vector<double>> rounds,
                       int rounds_first_lag_ms) {
             SampleResponse r;
             r.response_ms = std::move(response_ms);
             r.first_lag_ms = first_lag_ms;
             r.rounds = std::move(rounds);
             r.rounds_first_lag_ms = rounds_first_lag_ms;
             return r;
           }),
           "response_ms"_a, "first_lag_ms"_a = 0, "rounds"_a = std::vector<std::vector<double>>{},
           "rounds_first_lag_ms"_a = 0,
           "A response kept from an earlier fit_sample_response (e.g. SampleResponse(**d) with d read back from "
           "to_dict()'s JSON, less the fit's figures).")
      .def_readonly("rounds", &SampleResponse::rounds)
      .def_readonly("rounds_first_lag_ms", &SampleResponse::rounds_first_lag_ms)
      .def_readonly("smoothing", &SampleResponse::smoothing)
      .def_readonly("response_ms", &SampleResponse::response_ms)
      .def_readonly("first_lag_ms", &SampleResponse::first_lag_ms)
      .def_readonly("low_w", &SampleResponse::low_w)
      .def_readonly("high_w", &SampleResponse::high_w)
      .def_readonly("residual_rms_w", &SampleResponse::residual_rms_w)
      .def_readonly("samples", &SampleResponse::samples)
      .def_readonly("lag10_ms", &SampleResponse::lag10_ms)
      .def_readonly("lag50_ms", &SampleResponse::lag50_ms)
      .def_readonly("lag90_ms", &SampleResponse::lag90_ms)
      .def("to_dict",
           [](const SampleResponse& r) {
             return py::dict("response_ms"_a = r.response_ms, "first_lag_ms"_a = r.first_lag_ms, "low_w"_a = r.low_w,
                             "high_w"_a = r.high_w, "residual_rms_w"_a = r.residual_rms_w, "samples"_a = r.samples,
                             "lag10_ms"_a = r.lag10_ms, "lag50_ms"_a = r.lag50_ms, "lag90_ms"_a = r.lag90_ms,
                             "smoothing"_a = r.smoothing, "rounds"_a = r.rounds,
                             "rounds_first_lag_ms"_a = r.rounds_first_lag_ms);
           })
      .def("__repr__", [](const SampleResponse& r) {
        return "<SampleResponse " + repr_number(r.lag10_ms, 3) + "/" + repr_number(r.lag50_ms, 3) + "/" +
               repr_number(r.lag90_ms, 3) + " ms (10/50/90%) before the stamp, " + std::to_string(r.samples) +
               " samples, residual " + repr_number(r.residual_rms_w, 3) + " W>";
      });

  m.def(
      "fit_sample_response",
      [](PyMonitor& monitor, const joule::Measurement& measurement, const PyRegionRecorder& recorder,
         std::size_t gpu, const std::string& region, int min_lag_ms, int max_lag_ms) {
        py::gil_scoped_release release;
        return joule::attribution::fit_sample_response(monitor.monitor(), measurement, gpu, recorder.recorder(), region,
                                                       min_lag_ms, max_lag_ms);
      },
      "monitor"_a, "measurement"_a, "recorder"_a, "gpu"_a = 0, "region"_a = "high", "min_lag_ms"_a = -20,
      "max_lag_ms"_a = 60,
      "How a GPU's power samples respond to its power, from a settled window in which it alternated between "
      "`region` and other work at random lengths (joule.torch.measure_sample_response runs one): pass it to "
      "attribute(sample_response=...).");

  m.def(
      "attribute",
      [](PyMonitor& monitor, const joule::Measurement& measurement, const PyRegionRecorder& recorder,
         std::optional<double> baseline_w, int bootstrap_rounds, double confidence, double block_s,
         std::uint64_t seed, std::optional<double> sample_cover_ms, std::optional<double> sample_delay_ms,
         std::optional<SampleResponse> sample_response) {
        joule::attribution::AttributionOptions options;
        options.baseline_w = baseline_w;
        options.bootstrap_rounds = bootstrap_rounds;
        options.confidence = confidence;
        options.block_s = block_s;
        options.seed = seed;
        joule::attribution::SampleModel samples;
        if (sample_cover_ms) samples.cover_s = *sample_cover_ms / 1000.0;
        if (sample_delay_ms) samples.delay_s = *sample_delay_ms / 1000.0;
        samples.response = sample_response;
        py::gil_scoped_release release;
        return joule::attribution::attribute_window(monitor.monitor(), measurement, recorder.recorder(), options,
                                                    samples);
      },
      "monitor"_a, "measurement"_a, "recorder"_a, "baseline_w"_a = py::none(), "bootstrap_rounds"_a = 200,
      "confidence"_a = 0.9, "block_s"_a = 1.0, "seed"_a = 1, "sample_cover_ms"_a = py::none(),
      "sample_delay_ms"_a = py::none(), "sample_response"_a = py::none(),
      "The energy of a settled window (monitor.settle) split among the recorder's regions and the idle time, "
      "one Attribution per GPU. sample_cover_ms: the span before its stamp a driver sample averages; "
      "sample_delay_ms: how long after that span it is stamped (None: found by the fit); sample_response (from "
      "fit_sample_response) replaces both with the measured response. Do not record on the recorder meanwhile (the fit runs without the GIL).");

  m.def(
      "attribution_page",
      [](const std::string& title, const std::vector<joule::attribution::Attribution>& gpus,
         const std::vector<std::string>& gpu_labels) { return joule::attribution_page(title, gpus, gpu_labels); },
      "title"_a, "attributions"_a, "gpu_labels"_a = std::vector<std::string>{},
      "The HTML page of a window's attribution: per GPU, each region's share of time beside its share of energy, "
      "and the table.");

  py::class_<joule::PowerLimitOptimizer>(m, "PowerLimitOptimizer")
      .def(py::init([](PyMonitor& monitor, const std::string& objective, double eta, double max_slowdown, bool observer,
                       double step_w, int warmup_steps, int measure_steps, double min_warmup_s, double min_measure_s,
                       const std::string& job, int batch_size, const std::string& profile_path, bool reprofile,
                       std::optional<double> known_limit_w, std::optional<py::list> known_profile,
                       std::optional<py::function> on_profiled, bool noise_aware, int screening_rounds, int confirming_rounds,
                       int stretches_per_visit, double confidence, const std::string& knob, double step_mhz,
                       double min_clock_fraction) {
             joule::PowerLimitOptimizerOptions o;
             o.knob = joule::parse_optimizer_knob(knob);
             o.step_mhz = step_mhz;
             o.min_clock_fraction = min_clock_fraction;
             o.noise_aware = noise_aware;
             o.screening_rounds = screening_rounds;
             o.confirming_rounds = confirming_rounds;
             o.stretches_per_visit = stretches_per_visit;
             o.confidence = confidence;
             o.objective = joule::parse_objective(objective, eta, max_slowdown);
             o.observer = observer;
             o.step_w = step_w;
             o.warmup_steps = warmup_steps;
             o.measure_steps = measure_steps;
             o.min_warmup_s = min_warmup_s;
             o.min_measure_s = min_measure_s;
             o.job_name = job;
             o.batch_size = batch_size;
             o.profile_path = profile_path;
             o.reprofile = reprofile;
             o.known_limit_w = known_limit_w;
             if (known_profile) o.known_profile = profile_rows_from(*known_profile);
             if (on_profiled) o.on_profiled = profiled_callback(*on_profiled);
             return std::make_unique<joule::PowerLimitOptimizer>(monitor.monitor(), o);
           }),
           "monitor"_a, "objective"_a = "cost", "eta"_a = 0.5, "max_slowdown"_a = 1.1, "observer"_a = false,
           "step_w"_a = 25.0, "warmup_steps"_a = 5, "measure_steps"_a = 20, "min_warmup_s"_a = 1.0,
           "min_measure_s"_a = 2.0, "job"_a = "job", "batch_size"_a = 0, "profile_path"_a = "", "reprofile"_a = false,
           "known_limit_w"_a = py::none(), "known_profile"_a = py::none(), "on_profiled"_a = py::none(),
           "noise_aware"_a = true, "screening_rounds"_a = 3, "confirming_rounds"_a = 20, "stretches_per_visit"_a = 2,
           "confidence"_a = 0.95, "knob"_a = "power_limit", "step_mhz"_a = 90.0, "min_clock_fraction"_a = 0.5,
           py::keep_alive<1, 2>())
      .def("on_epoch_begin", &joule::PowerLimitOptimizer::on_epoch_begin, py::call_guard<py::gil_scoped_release>())
      .def("on_step_begin", &joule::PowerLimitOptimizer::on_step_begin, py::call_guard<py::gil_scoped_release>())
      .def("on_step_end", &joule::PowerLimitOptimizer::on_step_end, py::call_guard<py::gil_scoped_release>())
      .def("on_epoch_end", &joule::PowerLimitOptimizer::on_epoch_end, py::call_guard<py::gil_scoped_release>())
      .def("restore", &joule::PowerLimitOptimizer::restore, py::call_guard<py::gil_scoped_release>())
      .def("report", &joule::PowerLimitOptimizer::report)
      .def_property_readonly("state", [](const joule::PowerLimitOptimizer& o) {
        return o.state() == joule::PowerLimitOptimizer::State::kDecided ? "decided" : "profiling";
      })
      .def_property_readonly("observer", &joule::PowerLimitOptimizer::observer)
      .def_property_readonly("chosen_limit_w", &joule::PowerLimitOptimizer::chosen_limit_w)
      .def_property_readonly("knob", [](const joule::PowerLimitOptimizer& o) { return joule::to_string(o.knob()); })
      .def_property_readonly("chosen_setting", &joule::PowerLimitOptimizer::chosen_setting)
      .def_property_readonly("candidates", &joule::PowerLimitOptimizer::candidates)
      .def_property_readonly("candidate_limits_w", &joule::PowerLimitOptimizer::candidate_limits_w)
      .def_property_readonly("from_saved_profile", &joule::PowerLimitOptimizer::from_saved_profile)
      .def_property_readonly("from_caller", &joule::PowerLimitOptimizer::from_caller)
      .def_property_readonly("profile", [](const joule::PowerLimitOptimizer& o) { return profile_rows(o.profile()); });

  py::class_<joule::BatchSizeOptimizer>(m, "BatchSizeOptimizer")
      .def(py::init([](std::vector<int> batch_sizes, int default_batch_size, double beta, std::optional<std::size_t> window,
                       uint64_t seed) {
             joule::BatchSizeOptimizerOptions o;
             o.batch_sizes = std::move(batch_sizes);
             o.default_batch_size = default_batch_size;
             o.beta = beta;
             o.window = window;
             o.seed = seed;
             return joule::BatchSizeOptimizer(o);
           }),
           "batch_sizes"_a, "default_batch_size"_a, "beta"_a = 2.0, "window"_a = py::none(), "seed"_a = 1)
      .def("predict", &joule::BatchSizeOptimizer::predict)
      .def("observe", &joule::BatchSizeOptimizer::observe, "batch_size"_a, "cost"_a, "converged"_a)
      .def_property_readonly("early_stop_threshold_cost", &joule::BatchSizeOptimizer::early_stop_threshold_cost)
      .def_property_readonly("phase", [](const joule::BatchSizeOptimizer& o) {
        return o.phase() == joule::BatchSizeOptimizer::Phase::kPruning ? "pruning" : "thompson";
      })
      .def_property_readonly("candidates", &joule::BatchSizeOptimizer::candidates)
      .def("to_json", [](const joule::BatchSizeOptimizer& o) { return o.to_json().dump(); })
      .def_static(
          "from_json", [](const std::string& text) {
            nlohmann::json state;
            try {
              state = nlohmann::json::parse(text);
            } catch (const nlohmann::json::exception& e) {
              throw joule::UsageError(std::string("optimizer state: not valid JSON: ") + e.what());
            }
            return joule::BatchSizeOptimizer::from_json(state);
          },
          "text"_a);

  // One job on many nodes (joule.distributed): the parts of
  // include/joule/cluster/node_report.h that travel, as strings.
  m.def(
      "cluster_node_name", [](int world_rank) { return joule::cluster::node_name(world_rank); }, "world_rank"_a = -1,
      "The name of this process's node: $JOULE_NODE_NAME or the host name, with \"-<world_rank / K>\" appended "
      "under $JOULE_RANKS_PER_NODE=K.");
  m.def(
      "cluster_leader_message",
      [](PyMonitor& monitor, const joule::Measurement& measurement, const std::string& node,
         const std::vector<int>& ranks, double edge_wall_s, const std::vector<std::string>& warnings) {
        joule::cluster::NodeReport report = joule::cluster::node_report_of(node, ranks, monitor.monitor(), measurement);
        report.warnings.insert(report.warnings.end(), warnings.begin(), warnings.end());
        return joule::cluster::leader_message_json(report, edge_wall_s);
      },
      "monitor"_a, "measurement"_a, "node"_a, "ranks"_a, "edge_wall_s"_a, "warnings"_a = std::vector<std::string>{},
      "A node leader's message for a window (JSON): its devices' energy in the measurement, its ranks, the wall "
      "clock at the end edge, and warnings added to the measurement's.");
  m.def("cluster_visible_gpus", &joule::cluster::visible_gpus_from_environment,
        "This process's GPUs as its CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES name them, "
        "in one list for cluster_job_gpus (AMD entries written 'amd:<entry>'); None where none is set.");
  m.def("cluster_visible_gpus_of", &joule::cluster::visible_gpus_of, "cuda_visible"_a, "hip_visible"_a,
        "rocr_visible"_a,
        "cluster_visible_gpus() for the given values of CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and "
        "ROCR_VISIBLE_DEVICES (None: unset), as joule.process_layout reads a launcher's environment. Raises "
        "UsageError for a HIP index past ROCR's list.");
  m.def("cluster_job_gpus", &joule::cluster::job_gpus_of, "visible_per_rank"_a,
        "The GPUs a node's ranks may use, from each rank's cluster_visible_gpus() (None where it sees every GPU): "
        "None to measure all of the node's GPUs, else the entries (indices or UUIDs, AMD ones 'amd:...').");
  m.def(
      "cluster_monitor",
      [](const std::string& backend, const std::string& sim, const std::vector<std::string>& job_gpus,
         double interval_ms) {
        joule::Devices devices = open_devices(backend, sim, {});
        joule::cluster::keep_job_gpus(devices, job_gpus);
        return std::make_unique<PyMonitor>(std::move(devices), interval_ms, std::nullopt);
      },
      "backend"_a, "sim"_a, "job_gpus"_a, "interval_ms"_a,
      "A Monitor of the GPUs that job_gpus names (visible-device entries, each vendor's GPUs numbered by its own "
      "runtime, as cluster_job_gpus gives them) and all CPU zones. Raises UsageError for an entry that is no GPU here.");
  m.def("cluster_leader_error", &joule::cluster::leader_error_json, "node"_a, "error"_a, "edge_wall_s"_a,
        "A node leader's message (JSON) when its measurement failed: the node is reported missing with the error.");
  m.def(
      "cluster_report",
      [](const std::string& window, int world_size, const std::vector<LeaderOutcomeTuple>& outcomes) {
        std::vector<joule::cluster::LeaderOutcome> leaders;
        for (const auto& [rank, node, text, reason] : outcomes) {
          if (text) {
            leaders.push_back(joule::cluster::leader_outcome_from_json(rank, node, *text));
            if (leaders.back().report) leaders.back().node = leaders.back().report->node;
          } else {
            leaders.push_back({rank, node, std::nullopt, reason, std::nullopt});
          }
        }
        const joule::cluster::ClusterReport report = joule::cluster::assemble_cluster_report(window, world_size, leaders);
        return py::make_tuple(python_of(joule::cluster::to_json(report)), joule::cluster::to_text(report));
      },
      "window"_a, "world_size"_a, "outcomes"_a,
      "The job's report from its node leaders' outcomes, in rank order: (rank, node, message or None, why none). "
      "Returns (dict, text) as `joule measure --mpi` writes them (--json and the text report).");
}
