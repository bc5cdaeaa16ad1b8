// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// GpuEvents over the CUDA runtime a process has already loaded (PyTorch's
// libcudart), found and resolved at run time: joule links no CUDA, and an
// edge costs one cudaEventRecord from C++ instead of a torch.cuda.Event
// through Python (joule.torch's hooks; bench/README.md section 16b).
//
// Each edge is recorded on the stream its owner says work is queued on now
// (current_stream: PyTorch's current stream of the device, best from
// torch_current_stream()), on the device
// current on the calling thread. Events are created on first use and kept
// for reuse by the clock; all are destroyed with this object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/attribution/gpu_edge_clock.h"

namespace joule::attribution {

class CudaRuntimeEvents final : public GpuEvents {
 public:
  // The stream handle (a cudaStream_t) work on device is queued on now.
  using CurrentStream = std::function<std::uintptr_t(int device)>;

  // The path of the CUDA runtime (libcudart.so*) loaded in this process, if any.
  static std::optional<std::string> loaded_runtime();
  // PyTorch's current stream from C (torch's stable C shim,
  // aoti_torch_get_current_cuda_stream, in the libtorch_cuda.so this process
  // has loaded): no Python and no GIL per edge. None where that library is
  // not loaded or lacks the shim (an older PyTorch).
  static std::optional<CurrentStream> torch_current_stream();

  // Resolves the loaded runtime's event calls; DeviceError(kDriver) where no
  // runtime is loaded or it lacks one of them. stream_source names where
  // current_stream asks ("torch": torch_current_stream()).
  explicit CudaRuntimeEvents(CurrentStream current_stream, std::string stream_source = "custom");
  ~CudaRuntimeEvents() override;
  CudaRuntimeEvents(const CudaRuntimeEvents&) = delete;
  CudaRuntimeEvents& operator=(const CudaRuntimeEvents&) = delete;

  Event create() override;
  void record(Event event) override;
  bool reached(Event event) override;
  double elapsed_s(Event earlier, Event later) override;
  // cudaEventElapsedTime alone: its "not ready" is the answer, no query first.
  std::optional<double> elapsed_if_reached_s(Event earlier, Event later) override;
  void synchronize() override;

  const std::string& runtime_path() const;
  const std::string& stream_source() const { return stream_source_; }

 private:
  struct Runtime;
  void check(int status, const char* call) const;

  std::unique_ptr<Runtime> runtime_;
  CurrentStream current_stream_;
  std::string stream_source_;
  std::vector<void*> events_;
};

}  // namespace joule::attribution
