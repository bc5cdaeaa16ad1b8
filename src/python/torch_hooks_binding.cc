// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule._joule.TorchHooks: joule.torch.attribute's hooks in C++. A module's
// forward hooks and its backward hook are objects of this file that torch
// calls directly; each edge is one call into RegionNesting and the edge
// clock (C++ down to cudaEventRecord with a GpuEdgeClock over
// CudaRuntimeEvents), with no Python frame of ours on the way. torch is
// reached through the few callables the session hands over (grad mode,
// autograd's pass id, its engine's queue_callback, the Tensor type), so the
// module builds and imports without torch.
#include "module_support.h"

#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "concurrent_edges.h"
#include "joule/attribution/gpu_edge_clock.h"
#include "joule/attribution/region_nesting.h"

namespace py = pybind11;
using namespace pybind11::literals;
using joule::attribution::EdgeSink;
using joule::attribution::RegionNesting;

namespace {

// The edges of a Python object with begin, end and end_before_last
// (joule.torch's HostClock, the tests' stand-ins); called with the GIL held.
class PythonEdgeSink final : public EdgeSink {
 public:
  explicit PythonEdgeSink(const py::object& edges)
      : begin_(edges.attr("begin")), end_(edges.attr("end")), end_before_last_(edges.attr("end_before_last")) {}
  void begin(const std::string& name) override { begin_(name); }
  void end(const std::string& name) override { end_(name); }
  bool end_before_last(const std::string& name) override { return end_before_last_(name).cast<bool>(); }

 private:
  py::object begin_, end_, end_before_last_;
};

// What every hook of one session shares.
struct Session {
  Session(const py::object& edges_object, py::object is_grad_enabled_fn, py::object graph_task_fn,
          py::object queue_callback_fn, py::object tensor)
      : edges(edges_object),
        python_sink(joule::python::native_edge_sink(edges_object) ? nullptr
                                                                   : std::make_unique<PythonEdgeSink>(edges_object)),
        nesting(python_sink ? static_cast<EdgeSink&>(*python_sink) : *joule::python::native_edge_sink(edges_object)),
        is_grad_enabled(std::move(is_grad_enabled_fn)),
        graph_task(std::move(graph_task_fn)),
        queue_callback(std::move(queue_callback_fn)),
        tensor_type(std::move(tensor)) {}

  // The autograd pass running on this thread (-1: none; None where torch does not say).
  std::optional<std::int64_t> pass() const {
    if (graph_task.is_none()) return std::nullopt;
    return graph_task().cast<std::int64_t>();
  }
  void begin(const std::string& name) {
    const auto outside = [&] {
      const std::optional<std::int64_t> running = pass();
      return RegionNesting::outside_backward(running, !running && is_grad_enabled().cast<bool>());
    };
    nesting.begin(name, nesting.backward_open() && outside());
  }

  py::object edges;  // kept alive: the nesting's sink may be inside it
  std::unique_ptr<PythonEdgeSink> python_sink;
  RegionNesting nesting;
  py::object is_grad_enabled, graph_task, queue_callback, tensor_type;
  py::object end_of_pass;  // queued on autograd's engine at a pass's first backward region
};

// A module call's output arrived at its gradient: torch calls this as a
// pre-hook of the node that made it (with the gradients) or as a hook of a
// leaf tensor (with its gradient).
struct BackwardHook {
  std::shared_ptr<Session> session;
  std::string backward;
  void call(const py::args&) const {
    if (session->nesting.begin_backward(backward, session->pass())) session->queue_callback(session->end_of_pass);
  }
};

struct ForwardPreHook {
  std::shared_ptr<Session> session;
  std::string forward;
  void call(const py::args&) const { session->begin(forward); }
};

// Ends the call's forward and, with phases on and grad enabled, puts the
// backward hook on the node that made each output requiring grad (on the
// node, not the tensor: an in-place op after the module changes nothing).
struct ForwardHook {
  std::shared_ptr<Session> session;
  std::string path, forward, backward;
  bool phases = true;
  py::object backward_hook;
  void call(const py::args& args) const {
    session->nesting.end(forward);
    if (!phases || !session->is_grad_enabled().cast<bool>() || args.size() < 3) return;
    const py::handle output = args[2];
    bool hooked = false;
    const auto hook = [&](const py::handle& value) {
      if (!py::isinstance(value, session->tensor_type) || !value.attr("requires_grad").cast<bool>()) return;
      const py::object grad_fn = value.attr("grad_fn");
      grad_fn.is_none() ? value.attr("register_hook")(backward_hook) : grad_fn.attr("register_prehook")(backward_hook);
      hooked = true;
    };
    if (PyTuple_Check(output.ptr())) {
      for (const py::handle item : py::reinterpret_borrow<py::tuple>(output)) hook(item);
    } else {
      hook(output);
    }
    if (!hooked) {
      session->nesting.note("no output " + path,
                            backward + ": not recorded (forward returns no tensor requiring grad that the hooks see: " +
                                py::str(py::type::handle_of(output).attr("__name__")).cast<std::string>() + ")");
    }
  }
};

// A session's clock behind the C table of concurrent_edges.h: the DDP comm
// hook built against the user's PyTorch records the all-reduce through it,
// on whatever thread runs the hook (autograd's, or Gloo's for the end). A
// GpuEdgeClock whose edges run no Python is called without the GIL (it
// locks itself); any other clock under the GIL, which its other callers hold.
class ConcurrentEdges {
 public:
  explicit ConcurrentEdges(const py::object& edges)
      : edges_(edges),
        native_(joule::python::native_edge_sink(edges)),
        gil_free_(joule::python::edges_run_no_python(edges)),
        table_{} {
    if (!native_) begin_ = edges.attr("begin_concurrent"), end_ = edges.attr("end_concurrent");
    table_.version = JOULE_CONCURRENT_EDGES_VERSION;
    table_.edges = this;
    table_.begin = [](void* self, const char* region, char* error, std::size_t size) {
      return static_cast<ConcurrentEdges*>(self)->edge(true, region, error, size);
    };
    table_.end = [](void* self, const char* region, char* error, std::size_t size) {
      return static_cast<ConcurrentEdges*>(self)->edge(false, region, error, size);
    };
  }
  // The table in a capsule named JOULE_CONCURRENT_EDGES_CAPSULE; valid while
  // this object lives (the capsule holds no reference: keep this object).
  py::capsule capsule() { return py::capsule(&table_, JOULE_CONCURRENT_EDGES_CAPSULE); }

 private:
  int edge(bool begin, const char* region, char* error, std::size_t error_size) noexcept {
    try {
      const std::string name(region);
      if (gil_free_) {
        record(begin, name);
      } else {
        const py::gil_scoped_acquire gil;
        record(begin, name);
      }
      return 0;
    } catch (const std::exception& e) {
      if (error_size > 0) {
        std::strncpy(error, e.what(), error_size - 1);
        error[error_size - 1] = '\0';
      }
      return 1;
    }
  }

  void record(bool begin, const std::string& name) {
    if (native_) {
      begin ? native_->begin_concurrent(name) : native_->end_concurrent(name);
    } else {
      (begin ? begin_ : end_)(name);
    }
  }

  py::object edges_;  // kept alive: native_ is inside it
  joule::attribution::GpuEdgeClock* native_;
  bool gil_free_;  // native_ records without Python: called without the GIL
  py::object begin_, end_;  // a Python clock's (joule.torch's HostClock)
  joule_concurrent_edges table_;
};

}  // namespace

void bind_torch_hooks(py::module_& m) {
  py::class_<BackwardHook>(m, "_BackwardHook").def("__call__", &BackwardHook::call);
  py::class_<ForwardPreHook>(m, "_ForwardPreHook").def("__call__", &ForwardPreHook::call);
  py::class_<ForwardHook>(m, "_ForwardHook").def("__call__", &ForwardHook::call);

  py::class_<ConcurrentEdges>(m, "ConcurrentEdges")
      .def(py::init<const py::object&>(), "edges"_a,
           "A session's clock (a GpuEdgeClock, or an object with begin_concurrent(name) and end_concurrent(name)) "
           "behind a C table for C++ built apart from joule (joule/torch/_native/concurrent_edges.h).")
      .def_property_readonly("capsule", &ConcurrentEdges::capsule,
                             "The table in a capsule named \"" JOULE_CONCURRENT_EDGES_CAPSULE "\", valid while this "
                             "object lives.");

  py::class_<Session, std::shared_ptr<Session>>(m, "TorchHooks")
      .def(py::init([](const py::object& edges, py::object is_grad_enabled, py::object graph_task,
                       py::object queue_callback, py::object tensor_type) {
             auto session = std::make_shared<Session>(edges, std::move(is_grad_enabled), std::move(graph_task),
                                                      std::move(queue_callback), std::move(tensor_type));
             // The pass's end holds the session weakly: autograd's engine may
             // keep its callback past a session's end.
             session->end_of_pass = py::cpp_function([weak = std::weak_ptr<Session>(session)] {
               if (const std::shared_ptr<Session> alive = weak.lock()) alive->nesting.end_backward();
             });
             return session;
           }),
           "edges"_a, "is_grad_enabled"_a, "graph_task"_a, "queue_callback"_a, "tensor_type"_a,
           "joule.torch.attribute's hooks in C++ over `edges` (a GpuEdgeClock, or an object with begin(name), "
           "end(name) and end_before_last(name)). torch's parts: is_grad_enabled (torch.is_grad_enabled), graph_task "
           "(torch._C._current_graph_task_id, or None before torch 2.0), queue_callback (autograd's engine's), "
           "tensor_type (torch.Tensor). Keeps the nesting of the regions: see RegionNesting.")
      .def(
          "forward_hooks",
          [](const std::shared_ptr<Session>& self, const std::string& path, bool phases) {
            py::object backward_hook = py::cast(BackwardHook{self, path + ".backward"});
            return py::make_tuple(py::cast(ForwardPreHook{self, path + ".forward"}),
                                  py::cast(ForwardHook{self, path, path + ".forward", path + ".backward", phases,
                                                       std::move(backward_hook)}));
          },
          "path"_a, "phases"_a,
          "(pre, post): the forward pre-hook and forward hook of the module at `path`, recording \"<path>.forward\" "
          "and, with phases, \"<path>.backward\" (a hook on the node that made each output requiring grad).")
      .def("begin", &Session::begin, "name"_a, "A region of yours (or the optimizer's step) begins.")
      .def(
          "end", [](Session& self, const std::string& name) { self.nesting.end(name); }, "name"_a,
          "A region ends (repaired where it is not the innermost: see RegionNesting).")
      .def(
          "note", [](Session& self, const std::string& key, const std::string& text) { self.nesting.note(key, text); },
          "key"_a, "text"_a, "A line for notes, once per key.")
      .def(
          "close_all", [](Session& self) { self.nesting.close_all(); },
          "Ends every region still open, each with a note (the session ends).")
      .def_property_readonly("notes", [](const Session& self) { return self.nesting.notes(); })
      .def_property_readonly("open", [](const Session& self) { return self.nesting.open(); },
                             "The regions open, innermost last.");
}
