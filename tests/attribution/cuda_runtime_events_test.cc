// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// CudaRuntimeEvents against tests/fake_cudart (a libcudart.so.13 whose GPU
// passes each event 2 ms after its record and whose clock runs 0.1% slow):
// it finds the runtime only once the process has loaded one, records on the
// stream its owner names, and a GpuEdgeClock over it places regions where
// the simulated GPU ran them; and it takes PyTorch's current stream from
// torch's C shim (tests/fake_cudart/fake_torch_cuda.cc) once that is loaded.
#include "joule/attribution/cuda_runtime_events.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "joule/clock.h"
#include "joule/error.h"

namespace joule::attribution {
namespace {

TEST(CudaRuntimeEventsTest, FindsTheLoadedRuntimeAndRecordsOnTheOwnersStream) {
  // Nothing has loaded a CUDA runtime yet: a clear error, not a load of our own.
  ASSERT_FALSE(CudaRuntimeEvents::loaded_runtime());
  try {
    CudaRuntimeEvents events([](int) { return std::uintptr_t{0}; });
    FAIL() << "made without a runtime";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA runtime (libcudart.so) is loaded"), std::string::npos) << e.what();
  }

  void* fake = dlopen(JOULE_FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);  // as PyTorch's import would
  ASSERT_NE(fake, nullptr) << dlerror();
  ASSERT_EQ(CudaRuntimeEvents::loaded_runtime(), std::string(JOULE_FAKE_CUDART_PATH));
  const auto last_stream = reinterpret_cast<std::uintptr_t (*)()>(dlsym(fake, "fake_cudart_last_stream"));
  const auto live_events = reinterpret_cast<std::size_t (*)()>(dlsym(fake, "fake_cudart_live_events"));
  ASSERT_TRUE(last_stream && live_events);

  {
    int asked_device = -1;
    CudaRuntimeEvents events([&](int device) {
      asked_device = device;
      return std::uintptr_t{0xC0FFEE};
    });
    EXPECT_EQ(events.runtime_path(), JOULE_FAKE_CUDART_PATH);
    auto clock = std::make_shared<SteadyClock>();
    RegionRecorder recorder(clock);
    const double made_s = recorder.clock_s();
    GpuEdgeClock edges(recorder, events);
    EXPECT_EQ(asked_device, 0);
    EXPECT_EQ(last_stream(), 0xC0FFEEu);

    const double from_s = recorder.clock_s();
    double host_s = 0.0;  // the host's time between each pair of edges
    for (int i = 0; i < 20; ++i) {
      const double t0 = recorder.clock_s();
      edges.begin("work");
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      edges.end("work");
      host_s += recorder.clock_s() - t0;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    edges.flush();
    const double flushed_s = recorder.clock_s();
    const auto intervals = recorder.intervals_within(from_s, recorder.clock_s() + 1.0);
    ASSERT_EQ(intervals.size(), 20u);
    double gpu_s = 0.0;
    for (const RegionInterval& i : intervals) gpu_s += i.end_s - i.begin_s;
    // Each span is the host's between its records (the GPU lags by a constant
    // 2 ms), mapped back to the host's clock; the host's own span also holds
    // the record calls (and, on a loaded host, whatever preempted them).
    EXPECT_LE(gpu_s, host_s + 20e-6) << gpu_s << " vs " << host_s;
    EXPECT_GE(gpu_s, host_s - 20 * 200e-6) << gpu_s << " vs " << host_s;
    // The rate comes from two anchors ~0.1 s apart, each placed within its
    // bracket (wider on a loaded host): that bounds how far it may be off.
    const double rate_error_ppm = 1e6 * 2 * edges.uncertainty_s() / (flushed_s - made_s) + 20;
    EXPECT_NEAR(edges.drift_ppm(), 1e6 * (1 / 0.999 - 1), rate_error_ppm);
    EXPECT_GT(live_events(), 0u);
  }
  EXPECT_EQ(live_events(), 0u);  // every event it made is destroyed with it
}

// A clock reads its queue of events with one runtime call each: the elapsed
// time's own "not ready" ends a drain at the first event the GPU has not
// passed, with no cudaEventQuery before it (bench/README.md section 16p).
TEST(CudaRuntimeEventsTest, ReadsEachPassedEventWithOneCallAndStopsAtTheFirstNotPassed) {
  void* fake = dlopen(JOULE_FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  const auto queries = reinterpret_cast<std::size_t (*)()>(dlsym(fake, "fake_cudart_queries"));
  ASSERT_TRUE(queries);
  CudaRuntimeEvents events([](int) { return std::uintptr_t{0}; });
  const std::size_t queries_before = queries();

  const GpuEvents::Event first = events.create(), second = events.create();
  events.record(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the fake GPU passes an event 2 ms after its record
  events.record(second);
  EXPECT_EQ(events.elapsed_if_reached_s(first, second), std::nullopt);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const std::optional<double> apart_s = events.elapsed_if_reached_s(first, second);
  ASSERT_TRUE(apart_s);
  EXPECT_GE(*apart_s, 0.999 * 0.003 - 1e-6);
  EXPECT_NEAR(*apart_s, events.elapsed_s(first, second), 1e-9);

  auto clock = std::make_shared<SteadyClock>();
  RegionRecorder recorder(clock);
  GpuEdgeClockOptions options;
  options.drain_every = 4;  // drains between the edges, some events not yet passed
  GpuEdgeClock edges(recorder, events, options);
  const double from_s = recorder.clock_s();
  for (int i = 0; i < 20; ++i) {
    edges.begin("work");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    edges.end("work");
  }
  edges.flush();
  const auto intervals = recorder.intervals_within(from_s, recorder.clock_s() + 1.0);
  ASSERT_EQ(intervals.size(), 20u);
  for (std::size_t i = 1; i < intervals.size(); ++i) EXPECT_GE(intervals[i].begin_s, intervals[i - 1].end_s);
  EXPECT_EQ(queries(), queries_before);
}

// PyTorch's current stream from C: found only once libtorch_cuda.so is
// loaded (tests/fake_cudart's stand-in), then each edge asks it, with no
// callback of the owner's.
TEST(CudaRuntimeEventsTest, AsksPyTorchsCShimForTheCurrentStreamOnceItIsLoaded) {
  EXPECT_FALSE(CudaRuntimeEvents::torch_current_stream());
  void* fake = dlopen(JOULE_FAKE_TORCH_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);  // as a dependency of torch's _C
  ASSERT_NE(fake, nullptr) << dlerror();
  const auto set_stream = reinterpret_cast<void (*)(std::uintptr_t)>(dlsym(fake, "fake_torch_cuda_set_stream"));
  const auto calls = reinterpret_cast<long (*)()>(dlsym(fake, "fake_torch_cuda_stream_calls"));
  ASSERT_TRUE(set_stream && calls);

  std::optional<CudaRuntimeEvents::CurrentStream> current = CudaRuntimeEvents::torch_current_stream();
  ASSERT_TRUE(current);
  set_stream(0xAB);
  EXPECT_EQ((*current)(0), 0xABu);
  set_stream(0xCD);  // a stream guard changed it: asked again, not kept
  EXPECT_EQ((*current)(0), 0xCDu);
  EXPECT_EQ(calls(), 2);
  try {
    (*current)(3);
    FAIL() << "no error for a device the shim refused";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("aoti_torch_get_current_cuda_stream(3) failed"), std::string::npos)
        << e.what();
  }

  void* runtime = dlopen(JOULE_FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(runtime, nullptr) << dlerror();
  const auto last_stream = reinterpret_cast<std::uintptr_t (*)()>(dlsym(runtime, "fake_cudart_last_stream"));
  CudaRuntimeEvents events(std::move(*current), "torch");
  EXPECT_EQ(events.stream_source(), "torch");
  events.record(events.create());
  EXPECT_EQ(last_stream(), 0xCDu);
  EXPECT_EQ(calls(), 4);
}

}  // namespace
}  // namespace joule::attribution
