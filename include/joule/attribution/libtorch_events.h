// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// GpuEvents for LibTorch programs on CUDA: each edge a CUDA event on the
// stream LibTorch runs the current work on (c10's current stream), so a
// GpuEdgeClock places region edges on the GPU's clock without a sync per
// edge. Header-only: joule itself links no CUDA; include it from a program
// built against a CUDA LibTorch (its headers bring cuda_runtime_api.h).
//
//   joule::attribution::LibTorchCudaEvents events;
//   joule::attribution::GpuEdgeClock edges(recorder, events);
//   { joule::attribution::GpuRegion r(edges, "forward"); out = model->forward(x); }
//   ...
//   edges.flush();   // before attribute_window
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "joule/attribution/gpu_edge_clock.h"
#include "joule/error.h"

namespace joule::attribution {

class LibTorchCudaEvents final : public GpuEvents {
 public:
  LibTorchCudaEvents() = default;
  LibTorchCudaEvents(const LibTorchCudaEvents&) = delete;
  LibTorchCudaEvents& operator=(const LibTorchCudaEvents&) = delete;
  ~LibTorchCudaEvents() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  Event create() override {
    cudaEvent_t event = nullptr;
    check(cudaEventCreate(&event), "cudaEventCreate");
    events_.push_back(event);
    return reinterpret_cast<Event>(event);
  }
  void record(Event event) override {
    check(cudaEventRecord(as_cuda(event), at::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
  }
  bool reached(Event event) override {
    const cudaError_t status = cudaEventQuery(as_cuda(event));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it
      return false;
    }
    check(status, "cudaEventQuery");
    return true;
  }
  double elapsed_s(Event earlier, Event later) override {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, as_cuda(earlier), as_cuda(later)), "cudaEventElapsedTime");
    return ms / 1e3;
  }
  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

 private:
  static cudaEvent_t as_cuda(Event event) { return reinterpret_cast<cudaEvent_t>(event); }
  static void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
      throw DeviceError(DeviceErrc::kDriver, std::string(call) + ": " + cudaGetErrorString(status));
    }
  }
  std::vector<cudaEvent_t> events_;
};

}  // namespace joule::attribution
