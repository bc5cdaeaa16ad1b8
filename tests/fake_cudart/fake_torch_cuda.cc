// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A stand-in libtorch_cuda.so for the tests of CudaRuntimeEvents: PyTorch's
// stable C shim call for its current stream, answering the stream the tests
// set (fake_torch_cuda_set_stream) and counting the calls, so a test can tell
// an edge asked PyTorch from C and not through Python.
#include <atomic>
#include <cstdint>

namespace {
std::atomic<std::uintptr_t> current_stream{0};
std::atomic<long> calls{0};
constexpr std::int32_t kSuccess = 0;
constexpr std::int32_t kFailure = 1;  // AOTI_TORCH_FAILURE
}  // namespace

extern "C" {

__attribute__((visibility("default"))) std::int32_t aoti_torch_get_current_cuda_stream(std::int32_t device,
                                                                                         void** stream) {
  ++calls;
  if (device != 0) return kFailure;  // one GPU
  *stream = reinterpret_cast<void*>(current_stream.load());
  return kSuccess;
}

__attribute__((visibility("default"))) void fake_torch_cuda_set_stream(std::uintptr_t stream) {
  current_stream = stream;
}

__attribute__((visibility("default"))) long fake_torch_cuda_stream_calls() { return calls; }

}  // extern "C"
