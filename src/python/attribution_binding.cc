// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule._joule's regions and their energy: RegionRecorder and Region on a
// Monitor's clock, GpuEdgeClock (edges as GPU events) with its events,
// attribute() and fit_sample_response() over a settled window, the
// Attribution they give, and its HTML page.
#include "module_support.h"

#include "joule/analyze/attribution_report.h"
#include "joule/attribution/attribution.h"
#include "joule/attribution/cuda_runtime_events.h"
#include "joule/attribution/gpu_edge_clock.h"
#include "joule/attribution/regions.h"
#include "joule/attribution/response_store.h"
#include "joule/attribution/window.h"

namespace py = pybind11;
using namespace pybind11::literals;
using joule::python::PyMonitor;
using joule::python::repr_number;

namespace {

// Regions on a Monitor's clock (joule.RegionRecorder), which it shares.
class PyRegionRecorder {
 public:
  explicit PyRegionRecorder(PyMonitor& monitor)
      : synchronized_(static_cast<bool>(monitor.synchronize())),
        recorder_(monitor.monitor().sampler().shared_clock(), monitor.synchronize()) {}
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
  double clock_s() const { return recorder_.clock_s(); }
  const joule::attribution::RegionRecorder& recorder() const { return recorder_; }
  joule::attribution::RegionRecorder& recorder() { return recorder_; }
  bool synchronized() const { return synchronized_; }

 private:
  template <typename Fn>
  void edge(Fn&& fn) {
    if (!synchronized_) return fn();
    py::gil_scoped_release release;
    fn();
  }

  bool synchronized_;
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

using joule::attribution::CudaRuntimeEvents;
using joule::attribution::GpuEdgeClock;
using joule::attribution::GpuEvents;

// GpuEvents through a Python object with new(), record(e), done(e),
// elapsed_s(a, b) and synchronize() (joule.torch.CudaEvents: torch.cuda.Event;
// the tests' stand-ins). Its events live here, numbered by the clock.
class PythonEvents final : public GpuEvents {
 public:
  explicit PythonEvents(const py::object& events)
      : new_(events.attr("new")),
        record_(events.attr("record")),
        done_(events.attr("done")),
        elapsed_s_(events.attr("elapsed_s")),
        synchronize_(events.attr("synchronize")) {}
  Event create() override {
    events_.push_back(new_());
    return events_.size() - 1;
  }
  void record(Event event) override { record_(events_.at(event)); }
  bool reached(Event event) override { return done_(events_.at(event)).cast<bool>(); }
  double elapsed_s(Event earlier, Event later) override {
    return elapsed_s_(events_.at(earlier), events_.at(later)).cast<double>();
  }
  void synchronize() override { synchronize_(); }

 private:
  py::object new_, record_, done_, elapsed_s_, synchronize_;
  std::vector<py::object> events_;
};

// joule.GpuEdgeClock: the recorder's edges as GPU events, over either a
// CudaRuntimeEvents (an edge is C++ down to cudaEventRecord) or a Python
// events object. Every call keeps the GIL: the hooks that call it run on
// several threads (autograd's), and the GIL is what orders them.
class PyGpuEdgeClock {
 public:
  PyGpuEdgeClock(PyRegionRecorder& recorder, const py::object& events, int anchor_tries, std::size_t drain_every)
      : python_events_(py::isinstance<CudaRuntimeEvents>(events) ? nullptr : std::make_unique<PythonEvents>(events)),
        clock_(recorder.recorder(),
               python_events_ ? static_cast<GpuEvents&>(*python_events_) : events.cast<CudaRuntimeEvents&>(),
               {.anchor_tries = anchor_tries, .drain_every = drain_every}),
        gil_free_(!python_events_ && events.cast<CudaRuntimeEvents&>().stream_source() == "torch") {}
  GpuEdgeClock& clock() { return clock_; }
  const GpuEdgeClock& clock() const { return clock_; }
  // Whether an edge runs no Python (events and their stream from C): then a
  // thread without the GIL may record one, under the clock's own lock.
  bool gil_free() const { return gil_free_; }

 private:
  std::unique_ptr<PythonEvents> python_events_;
  GpuEdgeClock clock_;
  bool gil_free_;
};

py::dict region_energy_dict(const joule::attribution::RegionEnergy& r) {
  return py::dict("name"_a = r.name, "concurrent"_a = r.concurrent, "calls"_a = r.calls, "gpu_time_s"_a = r.gpu_time_s, "resolved"_a = r.resolved,
                  "power_w"_a = r.power_w, "power_above_baseline_w"_a = r.power_above_baseline_w,
                  "energy_j"_a = r.energy_j, "energy_per_call_j"_a = r.energy_per_call_j, "share"_a = r.share,
                  "energy_low_j"_a = r.energy_low_j, "energy_high_j"_a = r.energy_high_j,
                  "energy_std_j"_a = r.energy_std_j);
}

py::dict attribution_dict(const joule::attribution::Attribution& a) {
  py::list regions, totals;
  for (const auto& r : a.regions) regions.append(region_energy_dict(r));
  for (const auto& r : a.totals) totals.append(region_energy_dict(r));
  return py::dict("regions"_a = regions, "totals"_a = totals, "baseline_w"_a = a.baseline_w,
                  "baseline_low_w"_a = a.baseline_low_w,
                  "baseline_high_w"_a = a.baseline_high_w, "baseline_estimated"_a = a.baseline_estimated,
                  "baseline_separated"_a = a.baseline_separated, "idle_time_s"_a = a.idle_time_s,
                  "idle_energy_j"_a = a.idle_energy_j, "window_energy_j"_a = a.window_energy_j,
                  "model_energy_j"_a = a.model_energy_j, "scale"_a = a.scale, "observations"_a = a.observations,
                  "residual_rms_w"_a = a.residual_rms_w, "power_ceiling_w"_a = a.power_ceiling_w,
                  "power_capped_share"_a = a.power_capped_share, "notes"_a = a.notes,
                  "simulated"_a = a.simulated);
}

// {name: [region, ...]} (None: none) as RegionGroups, in its order.
std::vector<joule::attribution::RegionGroup> region_groups(const py::object& groups) {
  std::vector<joule::attribution::RegionGroup> out;
  if (groups.is_none()) return out;
  for (const auto& [name, regions] : groups.cast<py::dict>())
    out.push_back({name.cast<std::string>(), regions.cast<std::vector<std::string>>()});
  return out;
}

// The fit's options from the keyword arguments attribute() and
// attribute_data() share (milliseconds to seconds).
std::pair<joule::attribution::AttributionOptions, joule::attribution::SampleModel> fit_options(
    std::optional<double> baseline_w, int bootstrap_rounds, double confidence, double block_s, std::uint64_t seed,
    std::optional<double> sample_cover_ms, std::optional<double> sample_delay_ms,
    std::optional<joule::attribution::SampleResponse> sample_response, bool counter_increments,
    std::optional<double> counter_lag_ms, std::optional<double> model_bias, const py::object& totals,
    const py::object& same_power) {
  joule::attribution::AttributionOptions options;
  options.baseline_w = baseline_w;
  options.bootstrap_rounds = bootstrap_rounds;
  options.confidence = confidence;
  options.block_s = block_s;
  options.seed = seed;
  options.totals = region_groups(totals);
  options.same_power = region_groups(same_power);
  joule::attribution::SampleModel samples;
  if (sample_cover_ms) samples.cover_s = *sample_cover_ms / 1000.0;
  if (sample_delay_ms) samples.delay_s = *sample_delay_ms / 1000.0;
  samples.response = std::move(sample_response);
  samples.counter_increments = counter_increments;
  if (counter_lag_ms) samples.counter_lag_s = *counter_lag_ms / 1000.0;
  samples.model_bias = model_bias;
  return {std::move(options), std::move(samples)};
}

}  // namespace

joule::attribution::GpuEdgeClock* joule::python::native_edge_sink(const py::handle& edges) {
  if (!py::isinstance<PyGpuEdgeClock>(edges)) return nullptr;
  return &edges.cast<PyGpuEdgeClock&>().clock();
}

bool joule::python::edges_run_no_python(const py::handle& edges) {
  return py::isinstance<PyGpuEdgeClock>(edges) && edges.cast<PyGpuEdgeClock&>().gil_free();
}

void bind_attribution(py::module_& m) {
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

  py::class_<CudaRuntimeEvents>(m, "CudaRuntimeEvents")
      .def(py::init([](const py::object& current_stream) {
             if (current_stream.is_none()) {
               std::optional<CudaRuntimeEvents::CurrentStream> from_torch = CudaRuntimeEvents::torch_current_stream();
               if (!from_torch) {
                 throw joule::DeviceError(joule::DeviceErrc::kDriver,
                                          "PyTorch's C shim for its current stream (aoti_torch_get_current_cuda_stream "
                                          "in libtorch_cuda.so) is not loaded: pass current_stream");
               }
               return std::make_unique<CudaRuntimeEvents>(std::move(*from_torch), "torch");
             }
             return std::make_unique<CudaRuntimeEvents>(
                 [get = py::function(current_stream)](int device) {
                   py::gil_scoped_acquire gil;
                   return get(device).cast<std::uintptr_t>();
                 },
                 "python");
           }),
           "current_stream"_a = py::none(),
           "GPU events over the CUDA runtime this process has loaded (PyTorch's libcudart): each edge one "
           "cudaEventRecord on the stream work on the calling thread's current device is queued on now. "
           "current_stream: None asks PyTorch from C (its stable C shim in libtorch_cuda.so: no Python per edge); "
           "or a callable giving that stream's handle (an int) for a device (torch._C._cuda_getCurrentRawStream), "
           "called with the GIL per edge. DeviceError where no CUDA runtime is loaded, or with None where the "
           "shim is not.")
      .def_property_readonly("stream_source", &CudaRuntimeEvents::stream_source,
                             "Where each edge's stream comes from: 'torch' (PyTorch's C shim) or 'python'.")
      .def_property_readonly("runtime_path", &CudaRuntimeEvents::runtime_path)
      .def_static("loaded_runtime", &CudaRuntimeEvents::loaded_runtime,
                  "The path of the CUDA runtime loaded in this process, or None.");

  py::class_<PyGpuEdgeClock>(m, "GpuEdgeClock")
      .def(py::init<PyRegionRecorder&, const py::object&, int, std::size_t>(), "recorder"_a, "events"_a,
           "anchor_tries"_a = 16, "drain_every"_a = 1024, py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           "Region edges on the GPU's clock for a RegionRecorder: each edge records an event of `events` (a "
           "CudaRuntimeEvents, or an object with new(), record(e), done(e), elapsed_s(a, b), synchronize()) and "
           "waits for nothing; flush() waits for the GPU and hands the edges to the recorder at their GPU "
           "instants mapped to its clock (anchors at creation and at each flush, drift taken out).")
      .def("begin", [](PyGpuEdgeClock& self, const std::string& name) { self.clock().begin(name); }, "name"_a)
      .def("end", [](PyGpuEdgeClock& self, const std::string& name) { self.clock().end(name); }, "name"_a)
      .def(
          "begin_concurrent", [](PyGpuEdgeClock& self, const std::string& name) { self.clock().begin_concurrent(name); },
          "name"_a, "A call of a concurrent region (work on another stream) begins here.")
      .def(
          "end_concurrent", [](PyGpuEdgeClock& self, const std::string& name) { self.clock().end_concurrent(name); },
          "name"_a, "The earliest open call of concurrent region `name` ends here (never before it began).")
      .def(
          "end_before_last",
          [](PyGpuEdgeClock& self, const std::string& name) { return self.clock().end_before_last(name); }, "name"_a,
          "Ends `name` at the instant of the last nested edge, just before it (an edge found late); False if "
          "every nested edge was handed over already.")
      .def("flush", [](PyGpuEdgeClock& self) { self.clock().flush(); },
           "Waits for the GPU, anchors, and hands every edge recorded so far to the recorder.")
      .def_property_readonly("uncertainty_s", [](const PyGpuEdgeClock& self) { return self.clock().uncertainty_s(); },
                             "How far a mapped edge may be off the recorder's clock (the widest anchor's half-width).")
      .def_property_readonly("drift_ppm", [](const PyGpuEdgeClock& self) { return self.clock().drift_ppm(); },
                             "How much faster the recorder's clock ran than the GPU's, first to last anchor (ppm).")
      .def_property_readonly("reordered_edges",
                             [](const PyGpuEdgeClock& self) { return self.clock().reordered_edges(); },
                             "Edges the mapping put before the edge before them (moved up to it).");

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
      .def_readonly("totals", &Attribution::totals)
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
      .def_readonly("power_ceiling_w", &Attribution::power_ceiling_w)
      .def_readonly("power_capped_share", &Attribution::power_capped_share)
      // Writable: joule.torch sessions add what they know of the modules (identical ones' spread).
      .def_readwrite("notes", &Attribution::notes)
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
      .def_property_readonly(
          "source", [](const SampleResponse& r) { return r.source; },
          "Where it came from (a SampleResponseStore's file); '' for one measured here or given by hand.")
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

  using joule::attribution::GpuModel;
  using joule::attribution::SampleResponseStore;
  py::class_<SampleResponseStore>(m, "SampleResponseStore")
      .def(py::init([](const std::optional<std::string>& dir) {
             return dir ? SampleResponseStore(*dir) : SampleResponseStore();
           }),
           "dir"_a = py::none(),
           "Measured sample responses kept per GPU model and driver, one JSON file each in `dir` (None: "
           "$JOULE_SAMPLE_RESPONSE_DIR, else $XDG_CACHE_HOME/joule/sample-response, else "
           "~/.cache/joule/sample-response). joule.torch.measure_sample_response keeps what it measures here and "
           "joule.attribute uses it for that model and driver.")
      .def(
          "save",
          [](const SampleResponseStore& self, const std::string& gpu_name, const std::string& driver_version,
             const SampleResponse& response, const std::string& measured_at) {
            self.save(GpuModel{gpu_name, driver_version}, response, measured_at);
          },
          "gpu_name"_a, "driver_version"_a, "response"_a, "measured_at"_a,
          "Keeps response for this GPU model and driver (replacing one kept before); measured_at: when (ISO 8601). "
          "UsageError for a response that fails the checks a load makes.")
      .def(
          "load",
          [](const SampleResponseStore& self, const std::string& gpu_name, const std::string& driver_version) {
            return self.load(GpuModel{gpu_name, driver_version});
          },
          "gpu_name"_a, "driver_version"_a,
          "The response kept for this GPU model and driver (its source says which file), or None. UsageError "
          "naming the file for one that is damaged.")
      .def("drivers_for", &SampleResponseStore::drivers_for, "gpu_name"_a,
           "The drivers a response is kept for with this GPU name, sorted.")
      .def(
          "path_for",
          [](const SampleResponseStore& self, const std::string& gpu_name, const std::string& driver_version) {
            return self.path_for(GpuModel{gpu_name, driver_version}).string();
          },
          "gpu_name"_a, "driver_version"_a)
      .def_property_readonly("dir", [](const SampleResponseStore& self) { return self.dir().string(); });

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
         std::optional<SampleResponse> sample_response, bool counter_increments, std::optional<double> counter_lag_ms,
         std::optional<double> model_bias, const py::object& totals, const py::object& same_power) {
        const auto [options, samples] = fit_options(baseline_w, bootstrap_rounds, confidence, block_s, seed,
                                                    sample_cover_ms, sample_delay_ms, std::move(sample_response),
                                                    counter_increments, counter_lag_ms, model_bias, totals, same_power);
        py::gil_scoped_release release;
        return joule::attribution::attribute_window(monitor.monitor(), measurement, recorder.recorder(), options,
                                                    samples);
      },
      "monitor"_a, "measurement"_a, "recorder"_a, "baseline_w"_a = py::none(), "bootstrap_rounds"_a = 200,
      "confidence"_a = 0.9, "block_s"_a = 1.0, "seed"_a = 1, "sample_cover_ms"_a = py::none(),
      "sample_delay_ms"_a = py::none(), "sample_response"_a = py::none(), "counter_increments"_a = true,
      "counter_lag_ms"_a = py::none(), "model_bias"_a = py::none(), "totals"_a = py::none(),
      "same_power"_a = py::none(),
      "The energy of a settled window (monitor.settle) split among the recorder's regions and the idle time, "
      "one Attribution per GPU. sample_cover_ms: the span before its stamp a driver sample averages; "
      "sample_delay_ms: how long after that span it is stamped (None: found by the fit); sample_response (from "
      "fit_sample_response) replaces both with the measured response; counter_increments: fit the energy counter's increments with the samples where it was read every step (Monitor.read_counter_every_step), its lag behind the work counter_lag_ms (None: found by the fit); model_bias: with a sample_response, the model's own bias as a share of each region's energy (1 sigma), added to its interval (None: 7.5%, pooled from proof runs against their truths; 0: the statistical interval alone); totals: {name: [region, ...]}, regions reported together in Attribution.totals, the interval their sum's over the same bootstrap rounds (joule.torch sessions give each module's forward and backward); same_power: {name: [region, ...]}, regions fitted with one power, each its own time at it (joule.torch sessions give identical modules' forward regions, and their backward ones). Each GPU's highest power limit is read (read-only): a region fitted above 1.25 times it gets a note and an interval down to its time at the idle power (Attribution.power_ceiling_w). Do not record on the recorder meanwhile (the fit runs without the GIL).");

  m.def(
      "attribute_data",
      [](const std::vector<std::tuple<double, double, double>>& samples,
         const std::vector<std::tuple<double, double>>& counter, const py::list& intervals, double begin_s,
         double end_s, double energy_j, std::optional<double> baseline_w, int bootstrap_rounds, double confidence,
         double block_s, std::uint64_t seed, std::optional<double> sample_cover_ms,
         std::optional<double> sample_delay_ms, std::optional<SampleResponse> sample_response,
         bool counter_increments, std::optional<double> counter_lag_ms, std::optional<double> model_bias,
         const py::object& totals, const py::object& same_power, std::optional<double> power_ceiling_w) {
        std::vector<joule::ObservedPower> observed;
        for (const auto& [b, e, w] : samples) observed.push_back({b, e, w});
        std::vector<joule::CounterAnchor> values;
        for (const auto& [t, j] : counter) values.push_back({t, j, 0});
        // (name, begin_s, end_s, resumed[, concurrent]) as RegionRecorder.intervals gives them.
        std::vector<std::string> names;
        std::vector<joule::attribution::RegionInterval> pieces;
        for (const py::handle& item : intervals) {
          const auto t = item.cast<py::tuple>();
          if (t.size() != 4 && t.size() != 5) {
            throw joule::UsageError("attribute_data: an interval is (name, begin_s, end_s, resumed[, concurrent])");
          }
          const auto name = t[0].cast<std::string>();
          const auto at = std::find(names.begin(), names.end(), name);
          joule::attribution::RegionInterval v;
          v.region = static_cast<std::size_t>(at - names.begin());
          if (at == names.end()) names.push_back(name);
          v.begin_s = t[1].cast<double>();
          v.end_s = t[2].cast<double>();
          v.resumed = t[3].cast<bool>();
          v.concurrent = t.size() == 5 && t[4].cast<bool>();
          pieces.push_back(v);
        }
        auto [options, model] = fit_options(baseline_w, bootstrap_rounds, confidence, block_s, seed, sample_cover_ms,
                                            sample_delay_ms, std::move(sample_response), counter_increments,
                                            counter_lag_ms, model_bias, totals, same_power);
        options.power_ceiling_w = power_ceiling_w;
        py::gil_scoped_release release;
        return joule::attribution::attribute_observed(observed, values, std::move(pieces), names, begin_s, end_s,
                                                      energy_j, options, model);
      },
      "samples"_a, "counter"_a, "intervals"_a, "begin_s"_a, "end_s"_a, "energy_j"_a, "baseline_w"_a = py::none(),
      "bootstrap_rounds"_a = 200, "confidence"_a = 0.9, "block_s"_a = 1.0, "seed"_a = 1,
      "sample_cover_ms"_a = py::none(), "sample_delay_ms"_a = py::none(), "sample_response"_a = py::none(),
      "counter_increments"_a = true, "counter_lag_ms"_a = py::none(), "model_bias"_a = py::none(),
      "totals"_a = py::none(), "same_power"_a = py::none(), "power_ceiling_w"_a = py::none(),
      "attribute() from data kept from a run, e.g. to refit it offline: samples as Monitor.observed_power gives "
      "them, counter as Monitor.counter_values does ([] for none), intervals as RegionRecorder.intervals does "
      "(a fifth element True marks a concurrent region's), the window [begin_s, end_s] on their clock and its "
      "measured energy_j; the options as attribute's; power_ceiling_w: the GPU's highest power limit, where "
      "known (attribute() reads it from the GPU): a region fitted above 1.25 times it gets a note and an "
      "interval down to its time at the idle power. One Attribution.");

  m.def(
      "attribution_page",
      [](const std::string& title, const std::vector<joule::attribution::Attribution>& gpus,
         const std::vector<std::string>& gpu_labels) { return joule::attribution_page(title, gpus, gpu_labels); },
      "title"_a, "attributions"_a, "gpu_labels"_a = std::vector<std::string>{},
      "The HTML page of a window's attribution: per GPU, each region's share of time beside its share of energy, "
      "and the table.");
}
