// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A LibTorch training step's regions from its modules' calls, as
// joule.torch.attribute records them in Python: a recorded call's work is
// "<name>.forward", and a C++ pre-hook on the autograd node that made its
// output begins "<name>.backward" when that output's gradient arrives. The
// backward region lasts until the next recorded call's begins, or until
// autograd's pass ends (a callback queued on its engine), so backward regions
// follow each other without gaps. The nesting and its repairs are
// RegionNesting's; the edges go to an EdgeSink: a GpuEdgeClock over
// LibTorchCudaEvents (libtorch_events.h) on a GPU, each edge a CUDA event on
// the current stream (in backward: the stream autograd runs the node on), or
// RecorderEdges on the host.
//
//   joule::attribution::GpuEdgeClock clock(recorder, events);
//   joule::attribution::LibTorchRegions regions(clock);
//   auto fc1 = regions.module("fc1"), fc2 = regions.module("fc2");
//   ... h = fc1([&] { return model->fc1(x); }); out = fc2([&] { return model->fc2(h); });
//   loss.backward();       // fc2.backward, then fc1.backward until the pass ends
//   clock.flush();         // between steps, never during backward
//
// Header-only, for programs that link LibTorch (joule does not). Hooks run on
// autograd's threads: a mutex orders them with the caller's calls.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/version.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joule/attribution/region_nesting.h"

namespace joule::attribution {

class LibTorchRegions {
  struct Shared;

 public:
  explicit LibTorchRegions(EdgeSink& edges) : shared_(std::make_shared<Shared>(edges)) {}

  // One module's calls, recorded: `module(call)` runs call() (which returns
  // the module's output tensor) as "<name>.forward" and, with grad mode on,
  // hooks "<name>.backward" on the node that made the output.
  class Module {
   public:
    template <typename Call>
    torch::Tensor operator()(Call&& call) const {
      shared_->begin(forward_);
      torch::Tensor output;
      try {
        output = std::forward<Call>(call)();
      } catch (...) {
        shared_->end(forward_);
        throw;
      }
      shared_->end(forward_);
      if (torch::GradMode::is_enabled()) hook_backward(output);
      return output;
    }

   private:
    friend class LibTorchRegions;
    Module(std::shared_ptr<Shared> shared, const std::string& name)
        : shared_(std::move(shared)), forward_(name + ".forward"), backward_(name + ".backward") {}
    void hook_backward(const torch::Tensor& output) const;

    std::shared_ptr<Shared> shared_;
    std::string forward_, backward_;
  };

  Module module(const std::string& name) const { return Module(shared_, name); }
  // A block of yours (the data's copy, the optimizer's step) as a region.
  void begin(const std::string& name) { shared_->begin(name); }
  void end(const std::string& name) { shared_->end(name); }
  // What the recording repaired or left out, one line each.
  std::vector<std::string> notes() const {
    std::lock_guard lock(shared_->mutex);
    return shared_->nesting.notes();
  }
  // Ends every region still open, each with a note (before the last flush).
  void close_all() {
    std::lock_guard lock(shared_->mutex);
    shared_->nesting.close_all();
  }

 private:
  struct Shared {
    explicit Shared(EdgeSink& edges) : nesting(edges) {}
    void begin(const std::string& name) {
      std::lock_guard lock(mutex);
      nesting.begin(name, nesting.backward_open() &&
                              RegionNesting::outside_backward(pass(), torch::GradMode::is_enabled()));
    }
    void end(const std::string& name) {
      std::lock_guard lock(mutex);
      nesting.end(name);
    }
    std::mutex mutex;
    RegionNesting nesting;
  };

  // Begins a call's backward region when its output's gradient arrives; at
  // the pass's first, queues the end of the pass's last region.
  class BeginBackward final : public torch::autograd::FunctionPreHook {
   public:
    BeginBackward(std::shared_ptr<Shared> shared, std::string name)
        : shared_(std::move(shared)), name_(std::move(name)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
      std::lock_guard lock(shared_->mutex);
      if (shared_->nesting.begin_backward(name_, pass())) {
        torch::autograd::Engine::get_default_engine().queue_callback([weak = std::weak_ptr<Shared>(shared_)] {
          if (const std::shared_ptr<Shared> shared = weak.lock()) {
            std::lock_guard end_lock(shared->mutex);
            shared->nesting.end_backward();
          }
        });
      }
      return grads;
    }

   private:
    std::shared_ptr<Shared> shared_;
    std::string name_;
  };

  // The autograd pass running on this thread (none: -1); where LibTorch does
  // not say (before 2.0), none known.
  static std::optional<std::int64_t> pass() {
#if TORCH_VERSION_MAJOR >= 2
    return torch::autograd::get_current_graph_task_id();
#else
    return std::nullopt;
#endif
  }

  std::shared_ptr<Shared> shared_;
};

inline void LibTorchRegions::Module::hook_backward(const torch::Tensor& output) const {
  if (output.defined() && output.requires_grad() && output.grad_fn()) {
    output.grad_fn()->add_pre_hook(std::make_unique<BeginBackward>(shared_, backward_));
    return;
  }
  std::lock_guard lock(shared_->mutex);
  shared_->nesting.note("no output " + backward_,
                        backward_ + ": not recorded (the call's output has no autograd node: it requires no grad, "
                                    "or it is a leaf)");
}

}  // namespace joule::attribution
