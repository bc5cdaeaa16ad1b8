// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/cuda_runtime_events.h"

#include <link.h>

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/shared_library.h"
#include "joule/error.h"

namespace joule::attribution {

namespace {

// cudaError_t values that are part of the runtime's stable ABI.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNotReady = 600;

// A shared object loaded in this process whose file name begins with prefix.
struct LoadedSearch {
  std::string_view prefix;
  std::optional<std::string> path;
};

int find_loaded(dl_phdr_info* info, std::size_t, void* search_ptr) {
  auto& search = *static_cast<LoadedSearch*>(search_ptr);
  const std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name.rfind(search.prefix, 0) != 0) return 0;
  search.path = std::string(path);
  return 1;  // stops the iteration
}

std::optional<std::string> loaded_library(std::string_view prefix) {
  LoadedSearch search{.prefix = prefix, .path = std::nullopt};
  dl_iterate_phdr(find_loaded, &search);
  return search.path;
}

}  // namespace

// The runtime's calls, with its types as the ABI has them (handles are
// pointers, errors ints).
struct CudaRuntimeEvents::Runtime {
  explicit Runtime(const std::string& path)
      : library("CUDA runtime", path, "is PyTorch's CUDA runtime loaded?") {
    library.resolve_required(event_create, "cudaEventCreate");
    library.resolve_required(event_destroy, "cudaEventDestroy");
    library.resolve_required(event_record, "cudaEventRecord");
    library.resolve_required(event_query, "cudaEventQuery");
    library.resolve_required(event_elapsed_time, "cudaEventElapsedTime");
    library.resolve_required(device_synchronize, "cudaDeviceSynchronize");
    library.resolve_required(get_device, "cudaGetDevice");
    library.resolve_required(get_last_error, "cudaGetLastError");
    library.resolve_required(get_error_string, "cudaGetErrorString");
  }
  SharedLibrary library;
  int (*event_create)(void** event) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_elapsed_time)(float* ms, void* start, void* end) = nullptr;
  int (*device_synchronize)() = nullptr;
  int (*get_device)(int* device) = nullptr;
  int (*get_last_error)() = nullptr;
  const char* (*get_error_string)(int error) = nullptr;
};

std::optional<std::string> CudaRuntimeEvents::loaded_runtime() { return loaded_library("libcudart.so"); }

std::optional<CudaRuntimeEvents::CurrentStream> CudaRuntimeEvents::torch_current_stream() {
  const std::optional<std::string> path = loaded_library("libtorch_cuda.so");
  if (!path) return std::nullopt;
  auto library = std::make_shared<SharedLibrary>("PyTorch CUDA", *path, "is PyTorch's CUDA library loaded?");
  // torch's stable C shim (AOTITorchError is an int32_t, 0 on success).
  std::int32_t (*current_stream)(std::int32_t device, void** stream) = nullptr;
  library->resolve_optional(current_stream, "aoti_torch_get_current_cuda_stream");
  if (current_stream == nullptr) return std::nullopt;  // an older PyTorch, without the shim
  return [library, current_stream](int device) {
    void* stream = nullptr;
    if (const std::int32_t status = current_stream(device, &stream); status != 0) {
      throw DeviceError(DeviceErrc::kDriver,
                        fmt::format("aoti_torch_get_current_cuda_stream({}) failed (error {})", device, status));
    }
    return reinterpret_cast<std::uintptr_t>(stream);
  };
}

CudaRuntimeEvents::CudaRuntimeEvents(CurrentStream current_stream, std::string stream_source)
    : current_stream_(std::move(current_stream)), stream_source_(std::move(stream_source)) {
  const std::optional<std::string> path = loaded_runtime();
  if (!path) {
    throw DeviceError(DeviceErrc::kDriver,
                      "no CUDA runtime (libcudart.so) is loaded in this process: initialise CUDA first "
                      "(e.g. torch.cuda.init())");
  }
  if (!current_stream_) throw UsageError("CudaRuntimeEvents: no current_stream given");
  runtime_ = std::make_unique<Runtime>(*path);
}

CudaRuntimeEvents::~CudaRuntimeEvents() {
  // At a process's exit the runtime may be gone already: errors are ignored.
  for (void* event : events_) runtime_->event_destroy(event);
}

void CudaRuntimeEvents::check(int status, const char* call) const {
  if (status == kCudaSuccess) return;
  const char* what = runtime_->get_error_string(status);
  throw DeviceError(DeviceErrc::kDriver,
                    fmt::format("{} failed: {} (CUDA error {})", call, what != nullptr ? what : "unknown", status));
}

GpuEvents::Event CudaRuntimeEvents::create() {
  void* event = nullptr;
  check(runtime_->event_create(&event), "cudaEventCreate");
  events_.push_back(event);
  return reinterpret_cast<Event>(event);
}

void CudaRuntimeEvents::record(Event event) {
  int device = 0;
  check(runtime_->get_device(&device), "cudaGetDevice");
  const std::uintptr_t stream = current_stream_(device);
  check(runtime_->event_record(reinterpret_cast<void*>(event), reinterpret_cast<void*>(stream)), "cudaEventRecord");
}

bool CudaRuntimeEvents::reached(Event event) {
  const int status = runtime_->event_query(reinterpret_cast<void*>(event));
  if (status == kCudaErrorNotReady) {
    runtime_->get_last_error();  // not an error: clear it
    return false;
  }
  check(status, "cudaEventQuery");
  return true;
}

double CudaRuntimeEvents::elapsed_s(Event earlier, Event later) {
  float ms = 0.0f;
  check(runtime_->event_elapsed_time(&ms, reinterpret_cast<void*>(earlier), reinterpret_cast<void*>(later)),
        "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

std::optional<double> CudaRuntimeEvents::elapsed_if_reached_s(Event earlier, Event later) {
  float ms = 0.0f;
  const int status =
      runtime_->event_elapsed_time(&ms, reinterpret_cast<void*>(earlier), reinterpret_cast<void*>(later));
  if (status == kCudaErrorNotReady) {
    runtime_->get_last_error();  // not an error: clear it
    return std::nullopt;
  }
  check(status, "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

void CudaRuntimeEvents::synchronize() { check(runtime_->device_synchronize(), "cudaDeviceSynchronize"); }

const std::string& CudaRuntimeEvents::runtime_path() const { return runtime_->library.path(); }

}  // namespace joule::attribution
