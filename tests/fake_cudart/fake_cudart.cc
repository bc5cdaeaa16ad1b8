// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A stand-in libcudart.so for the tests of CudaRuntimeEvents: the event calls
// joule resolves, on a simulated GPU that passes each event kLagS after it
// was recorded (a GPU behind its host) and whose clock runs kRate times the
// host's (the drift a GpuEdgeClock takes out). The runtime's C ABI: handles
// are pointers, errors ints (0 success, 600 not ready). It also tells the
// tests what it was asked (fake_cudart_*): the last stream an event was
// recorded on, how many records and queries it took, and how many events exist.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_set>

namespace {

constexpr double kLagS = 0.002;
constexpr double kRate = 0.999;
constexpr int kSuccess = 0;
constexpr int kInvalidResourceHandle = 400;
constexpr int kNotReady = 600;

struct Event {
  bool recorded = false;
  double passed_at_s = 0.0;  // on the host's clock
};

std::mutex mutex;
std::unordered_set<Event*> live;
double busy_until_s = 0.0;
std::uintptr_t last_stream = 0;
std::size_t records = 0;
std::size_t queries = 0;  // cudaEventQuery calls
int last_error = kSuccess;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int fail(int error) { return last_error = error; }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cudaEventCreate(void** event) {
  std::lock_guard lock(mutex);
  auto* e = new Event;
  live.insert(e);
  *event = e;
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaEventDestroy(void* event) {
  std::lock_guard lock(mutex);
  if (live.erase(static_cast<Event*>(event)) == 0) return fail(kInvalidResourceHandle);
  delete static_cast<Event*>(event);
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaEventRecord(void* event, void* stream) {
  std::lock_guard lock(mutex);
  auto* e = static_cast<Event*>(event);
  if (live.count(e) == 0) return fail(kInvalidResourceHandle);
  busy_until_s = std::max(busy_until_s, now_s() + kLagS);
  e->recorded = true;
  e->passed_at_s = busy_until_s;
  last_stream = reinterpret_cast<std::uintptr_t>(stream);
  ++records;
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaEventQuery(void* event) {
  std::lock_guard lock(mutex);
  auto* e = static_cast<Event*>(event);
  if (live.count(e) == 0) return fail(kInvalidResourceHandle);
  ++queries;
  return now_s() >= e->passed_at_s ? kSuccess : fail(kNotReady);
}

__attribute__((visibility("default"))) int cudaEventElapsedTime(float* ms, void* start, void* end) {
  std::lock_guard lock(mutex);
  auto *a = static_cast<Event*>(start), *b = static_cast<Event*>(end);
  if (live.count(a) == 0 || live.count(b) == 0 || !a->recorded || !b->recorded) return fail(kInvalidResourceHandle);
  if (now_s() < a->passed_at_s || now_s() < b->passed_at_s) return fail(kNotReady);
  *ms = static_cast<float>(1e3 * kRate * (b->passed_at_s - a->passed_at_s));
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaDeviceSynchronize() {
  double until_s = 0.0;
  {
    std::lock_guard lock(mutex);
    until_s = busy_until_s;
  }
  while (now_s() < until_s) std::this_thread::sleep_for(std::chrono::microseconds(100));
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int cudaGetLastError() {
  std::lock_guard lock(mutex);
  const int error = last_error;
  last_error = kSuccess;
  return error;
}

__attribute__((visibility("default"))) const char* cudaGetErrorString(int error) {
  switch (error) {
    case kSuccess: return "no error";
    case kInvalidResourceHandle: return "invalid resource handle";
    case kNotReady: return "device not ready";
    default: return "unrecognized error code";
  }
}

__attribute__((visibility("default"))) std::uintptr_t fake_cudart_last_stream() {
  std::lock_guard lock(mutex);
  return last_stream;
}

__attribute__((visibility("default"))) std::size_t fake_cudart_records() {
  std::lock_guard lock(mutex);
  return records;
}

__attribute__((visibility("default"))) std::size_t fake_cudart_queries() {
  std::lock_guard lock(mutex);
  return queries;
}

__attribute__((visibility("default"))) std::size_t fake_cudart_live_events() {
  std::lock_guard lock(mutex);
  return live.size();
}

}  // extern "C"
