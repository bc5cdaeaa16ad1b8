// Throughput and latency of the batch-size service over HTTP: an in-process
// `joule serve` (HttpServer on a loopback port, the store given by --store)
// and N client threads, each doing ask + report round trips on one shared job
// for a while. Prints round trips per second and request latency percentiles.
//   build/bin/joule_bench_service --clients 32 --seconds 10 [--store sqlite:/tmp/b.db]
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "joule/service/client.h"
#include "joule/service/http_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 32;
  double seconds = 10;
  std::string store_url;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--clients") clients = std::stoi(argv[i + 1]);
    else if (arg == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (arg == "--store") store_url = argv[i + 1];
    else {
      fmt::print(stderr, "usage: joule_bench_service [--clients N] [--seconds S] [--store URL]\n");
      return 2;
    }
  }
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("joule_bench_service_{}.db", getpid())).string();
  if (store_url.empty()) store_url = "sqlite:" + path;
  using namespace joule::service;
  auto store = std::shared_ptr<JobStore>(open_job_store(store_url));
  ServeOptions options;
  options.port = 0;
  HttpServer server(std::make_shared<BatchSizeService>(store), store->describe(), options);
  std::thread serving([&] { server.run(); });
  const std::string url = fmt::format("http://127.0.0.1:{}", server.port());
  const std::string job = fmt::format("bench-{}", getpid());
  BatchSizeClient(url).register_job(JobSpec::from_json(
      {{"name", job}, {"batch_sizes", {16, 32, 64, 128, 256, 512}}, {"default_batch_size", 64}, {"max_power_w", 300}}));

  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies_ms(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  std::atomic<int64_t> round_trips{0}, errors{0};
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      BatchSizeClient client(url);
      auto& mine = latencies_ms[static_cast<std::size_t>(c)];
      for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        try {
          auto t0 = Clock::now();
          const Assignment a = client.ask(job, fmt::format("client-{}", c));
          auto t1 = Clock::now();
          client.report(a.recurrence_id, {100.0 * a.batch_size, 1000.0 / a.batch_size + i % 7, true, false});
          auto t2 = Clock::now();
          mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          mine.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
          round_trips.fetch_add(1, std::memory_order_relaxed);
        } catch (const std::exception& e) {
          if (errors.fetch_add(1) == 0) fmt::print(stderr, "first error: {}\n", e.what());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  server.stop();
  serving.join();
  std::vector<double> all;
  for (auto& v : latencies_ms) all.insert(all.end(), v.begin(), v.end());
  fmt::print("store: {}\nclients: {}, {:.1f} s: {} ask+report round trips ({:.0f}/s), {} errors\n",
             store->describe(), clients, elapsed_s, round_trips.load(), round_trips.load() / elapsed_s, errors.load());
  fmt::print("request latency ms: p50 {:.2f}, p90 {:.2f}, p99 {:.2f}, max {:.2f}\n", percentile(all, 0.5),
             percentile(all, 0.9), percentile(all, 0.99), percentile(all, 1.0));
  if (store_url == "sqlite:" + path) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
  return errors.load() == 0 ? 0 : 1;
}
