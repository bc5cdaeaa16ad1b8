// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// DDP's gradient all-reduce as joule.torch's concurrent region, in C++:
// joule.torch builds this file against the user's PyTorch at first use
// (torch.utils.cpp_extension; joule's own module is built without torch).
// The hook averages the gradients as DDP does without a hook (NCCL's AVG,
// else divide by the group's size and sum) and, while a session records,
// records an edge as it launches the all-reduce and one when the
// all-reduce's future completes (with NCCL on a stream that waited for the
// communication). It reaches the session through the C table of
// concurrent_edges.h, so nothing of joule's C++ ABI meets torch's. No Python
// runs at a bucket: with joule's GPU clock over PyTorch's C shim an edge
// takes no GIL either (other clocks take it).
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/extension.h>
#if __has_include(<torch/csrc/distributed/autograd/context/context.h>)
#include <torch/csrc/distributed/c10d/reducer.hpp>
#else
// Debian's libtorch-dev leaves out headers reducer.hpp includes (distributed
// autograd's). The hook needs one member of the Reducer, declared here as
// torch declares it; a torch where it differs fails to load this module,
// and joule.torch says so (see native_comm_hook in ddp.py).
namespace c10d {
class TORCH_API Reducer {
 public:
  void register_comm_hook(std::unique_ptr<CommHookInterface> iface);
};
}  // namespace c10d
#endif

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "concurrent_edges.h"

namespace py = pybind11;

namespace {

// Where the hook records: the open session's table, or none. A call's end is
// recorded only in the session its begin went to. Outside a session a
// bucket reads one atomic flag; inside, the table is called under this
// object's lock, which record_into takes without the GIL (the table takes
// the GIL itself where the session's clock needs it).
class Recording {
 public:
  explicit Recording(std::string region) : region_(std::move(region)) {}
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording() {
    if (owner_ != nullptr) {
      const py::gil_scoped_acquire gil;
      Py_DECREF(owner_);
    }
  }

  // Records into the table in `edges` (a joule._joule.ConcurrentEdges), or
  // stops with None. Called from Python.
  void record_into(const py::object& edges) {
    const joule_concurrent_edges* table = nullptr;
    if (!edges.is_none()) {
      const auto capsule = edges.attr("capsule").cast<py::capsule>();
      if (capsule.name() == nullptr || std::string(capsule.name()) != JOULE_CONCURRENT_EDGES_CAPSULE) {
        throw std::invalid_argument("joule comm hook: the edges' capsule is not joule's concurrent edges");
      }
      table = capsule.get_pointer<const joule_concurrent_edges>();
      if (table->version != JOULE_CONCURRENT_EDGES_VERSION) {
        throw std::invalid_argument("joule comm hook: built for another version of joule's concurrent edges "
                                    "(rebuild it: remove torch's extension cache)");
      }
    }
    PyObject* incoming = table != nullptr ? edges.inc_ref().ptr() : nullptr;  // keeps the table alive
    PyObject* outgoing = nullptr;
    {
      const py::gil_scoped_release no_gil;
      const std::lock_guard<std::mutex> lock(mutex_);
      table_ = table;
      outgoing = owner_;
      owner_ = incoming;
      ++session_;
      recording_.store(table != nullptr, std::memory_order_release);
    }
    Py_XDECREF(outgoing);
  }

  // The session a begin went to (0: none recorded).
  std::uint64_t begin() { return edge(true, 0); }
  void end(std::uint64_t session) {
    if (session != 0) edge(false, session);
  }

 private:
  std::uint64_t edge(bool begin, std::uint64_t session) {
    if (!recording_.load(std::memory_order_acquire)) return 0;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (table_ == nullptr || (!begin && session != session_)) return 0;
    std::array<char, 512> error{};
    const auto call = begin ? table_->begin : table_->end;
    const int failed = call(table_->edges, region_.c_str(), error.data(), error.size());
    if (failed) throw std::runtime_error(std::string("joule comm hook: ") + error.data());
    return session_;
  }

  const std::string region_;
  std::atomic<bool> recording_{false};
  std::mutex mutex_;
  const joule_concurrent_edges* table_ = nullptr;
  PyObject* owner_ = nullptr;  // a reference to the table's owner
  std::uint64_t session_ = 1;
};

// Derives from the interface itself, not torch's CppCommHookInterface,
// whose parseHookResult calls a function not every libtorch exports.
class RecordedAllreduce final : public c10d::CommHookInterface {
 public:
  RecordedAllreduce(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<Recording> recording)
      : group_(std::move(group)), recording_(std::move(recording)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    std::vector<at::Tensor> tensors = {bucket.getBufferRef()};
    c10d::AllreduceOptions options;
    if (tensors[0].is_cuda() && group_->getBackendName().find("nccl") != std::string::npos) {
      // NCCL scales by 1/size inside the reduction, as DDP without a hook
      // scales in its copy into the bucket: no pass of its own over the
      // gradients (one costs ~1% of a GPT step on two H200s).
      options.reduceOp = c10d::ReduceOp::AVG;
    } else {
      tensors[0] /= group_->getSize();  // as DDP's built-in ALLREDUCE hook: the mean, without overflow in fp16
    }
    c10::intrusive_ptr<c10::ivalue::Future> communicated = group_->allreduce(tensors, options)->getFuture();
    // The begin edge after the launch, so that its host time does not delay
    // the all-reduce (under DDP the host is on the step's critical path). On
    // the current stream it marks the same point of backward: NCCL's launch
    // queued only a marker there (with Gloo: after the division).
    const std::uint64_t session = recording_->begin();
    if (session == 0) return communicated;
    return communicated->then(
        [recording = recording_, session](c10::ivalue::Future& done) {
          recording->end(session);
          return done.value();
        },
        communicated->elementType());
  }

  // The all-reduce's future holds the list of the one tensor it reduced.
  at::Tensor parseHookResult(const c10::IValue& result) override {
    return result.isTensor() ? result.toTensor() : result.toTensorVector().at(0);
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<Recording> recording_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Recording, std::shared_ptr<Recording>>(m, "Recording")
      .def(py::init<std::string>(), py::arg("region"))
      .def("record_into", &Recording::record_into, py::arg("edges"));
  m.def(
      "register",
      [](const py::object& reducer, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
         const std::shared_ptr<Recording>& recording) {
        reducer.cast<c10d::Reducer&>().register_comm_hook(std::make_unique<RecordedAllreduce>(group, recording));
      },
      py::arg("reducer"), py::arg("process_group"), py::arg("recording"));
}
