// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule._joule's optimizers: the power-limit optimizer on a Monitor (its
// callbacks as in C++, profiles as lists of dicts) and the batch-size
// optimizer with its JSON state.
#include "module_support.h"

#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace py = pybind11;
using namespace pybind11::literals;
using joule::python::PyMonitor;

namespace {

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

}  // namespace

void bind_optimizers(py::module_& m) {
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
}
