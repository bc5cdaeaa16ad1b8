// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The kubelet's PodResources API, as joule reads it: a fake kubelet (a real
// gRPC server on a Unix socket, answering List with the pods the test sets)
// for the client, and for the real `joule exporter --kubelet-socket` on the
// fake NVML, scraped while pods come and go, the socket vanishes and a
// socket that never answers stands in its place.
#include "joule/scheduler/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/test_support.h"
#include "joule/error.h"
#include "scheduler/kubelet_pod_resources.grpc.pb.h"

namespace joule {
namespace {

using testing::TempDir;

struct FakeContainer {
  std::string namespace_name, pod, container, resource;
  std::vector<std::string> device_ids;
};

// A kubelet's pod-resources endpoint: List answers with pods_.
class FakeKubelet final : public v1::PodResourcesLister::Service {
 public:
  explicit FakeKubelet(const std::string& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeKubelet() override { stop(); }
  bool running() const { return server_ != nullptr; }
  void stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
  }
  void set_pods(std::vector<FakeContainer> pods) {
    std::lock_guard lock(mutex_);
    pods_ = std::move(pods);
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*, v1::ListPodResourcesResponse* reply) override {
    std::lock_guard lock(mutex_);
    for (const FakeContainer& c : pods_) {
      v1::PodResources* pod = reply->add_pod_resources();
      pod->set_name(c.pod);
      pod->set_namespace_(c.namespace_name);
      v1::ContainerResources* container = pod->add_containers();
      container->set_name(c.container);
      v1::ContainerDevices* devices = container->add_devices();
      devices->set_resource_name(c.resource);
      for (const std::string& id : c.device_ids) devices->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

 private:
  std::mutex mutex_;
  std::vector<FakeContainer> pods_;
  std::unique_ptr<grpc::Server> server_;
};

// A Unix socket that takes connections and never says a word: a hung kubelet.
class SilentSocket {
 public:
  explicit SilentSocket(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(fd_, 64) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~SilentSocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

const char kGpu0[] = "GPU-fake0000-0000-0000-0000-000000000000";
const char kGpu1[] = "GPU-fake0000-0000-0000-0000-000000000001";

TEST(PodResourcesTest, ListsTheContainersHoldingEachGpuAndNothingElse) {
  TempDir tmp;
  const std::string socket = tmp.file("kubelet.sock");
  FakeKubelet kubelet(socket);
  ASSERT_TRUE(kubelet.running());
  kubelet.set_pods({{"ml", "trainer-0", "pytorch", "nvidia.com/gpu", {kGpu0, kGpu1}},
                    {"ml", "notebook", "jupyter", "nvidia.com/gpu.shared", {std::string(kGpu1) + "::1"}},
                    {"web", "cache", "redis", "example.com/nic", {"eth3"}},
                    {"ml", "mig-user", "main", "nvidia.com/mig-1g.10gb", {"MIG-1234"}},
                    {"amd", "infer", "main", "amd.com/gpu", {"0000:c1:00.0"}}});
  PodResourcesClient client(socket);
  const DeviceHolders holders = client.list_gpu_holders();
  EXPECT_EQ(holders.size(), 5u);
  EXPECT_EQ(holders.at(kGpu0), (std::vector<KubernetesPod>{{"ml", "trainer-0", "pytorch"}}));
  EXPECT_EQ(holders.count("eth3"), 0u);
  EXPECT_EQ(holders_of_gpu(holders, kGpu1, "").size(), 2u);
  EXPECT_EQ(holders_of_gpu(holders, "GPU-other", "00000000:C1:00.0"),
            (std::vector<KubernetesPod>{{"amd", "infer", "main"}}));
  kubelet.set_pods({});
  EXPECT_TRUE(client.list_gpu_holders().empty());
}

TEST(PodResourcesTest, AMissingOrSilentSocketIsAnErrorWithinTheTimeout) {
  TempDir tmp;
  PodResourcesClient missing(tmp.file("none.sock"), 0.3);
  try {
    missing.list_gpu_holders();
    ADD_FAILURE() << "no error without a socket";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.sock: no such socket"), std::string::npos) << e.what();
  }
  SilentSocket silent(tmp.file("silent.sock"));
  ASSERT_TRUE(silent.ok());
  PodResourcesClient hung(tmp.file("silent.sock"), 0.3);
  const auto start = std::chrono::steady_clock::now();
  try {
    hung.list_gpu_holders();
    ADD_FAILURE() << "no error from a socket that never answers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("silent.sock"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

std::string scrape(const std::string& url, double* took_s = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  std::string text = testing::http_get(url);
  if (took_s) *took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return text;
}

// Scrapes until `ok` holds (at most 10 s); the last text.
bool has_line(const std::string& text, const std::string& family, const std::vector<std::string>& parts) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(family + "{", 0) != 0) continue;
    if (std::all_of(parts.begin(), parts.end(), [&](const auto& p) { return line.find(p) != std::string::npos; })) {
      return true;
    }
  }
  return false;
}

TEST(PodResourcesTest, TheExporterLabelsGpusWithThePodsHoldingThemAsTheyComeAndGo) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device power_w=300\ndevice power_w=200\n");
  const std::string socket = tmp.file("kubelet.sock");
  auto kubelet = std::make_unique<FakeKubelet>(socket);
  kubelet->set_pods({{"ml", "trainer-0", "pytorch", "nvidia.com/gpu", {kGpu0}}});
  const std::string port_file = tmp.file("port");
  const pid_t exporter = testing::start_process(
      {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file, "--interval-s", "0.2",
       "--jouled-socket", "", "--kubelet-socket", socket},
      {{"JOULE_NVML_LIBRARY", fake.library_path},
       {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"},
       {"JOULE_POWERCAP_ROOT", "/nonexistent"}},
      tmp.file("out"), tmp.file("err"));
  testing::ProcessReaper reaper(exporter);
  const int port = testing::wait_for_port_file(port_file);
  ASSERT_NE(port, 0) << testing::read_file(tmp.file("err"));
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  const std::string trainer = R"(namespace="ml",pod="trainer-0",container="pytorch")";
  std::string text = testing::http_get_until(url, [&](const std::string& t) {
    return has_line(t, "joule_pod_gpu_energy_joules_total", {trainer, "gpu=\"0\""});
  });
  EXPECT_TRUE(has_line(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"0\"", trainer})) << text;
  EXPECT_FALSE(has_line(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"1\"", "pod="})) << text;
  EXPECT_TRUE(has_line(text, "joule_kubelet_up", {"} 1"})) << text;

  // The trainer ends, a notebook takes the other GPU.
  kubelet->set_pods({{"ml", "notebook", "jupyter", "nvidia.com/gpu", {kGpu1}}});
  text = testing::http_get_until(url, [&](const std::string& t) {
    return has_line(t, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"1\"", "pod=\"notebook\""});
  });
  EXPECT_TRUE(has_line(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"1\"", "pod=\"notebook\""})) << text;
  EXPECT_FALSE(has_line(text, "DCGM_FI_DEV_POWER_USAGE", {"gpu=\"0\"", "pod="})) << text;
  EXPECT_TRUE(has_line(text, "joule_pod_gpu_energy_joules_total", {trainer})) << text;  // its total stays

  // The kubelet goes away, then a socket that never answers stands in its
  // place: said in a metric, and the scrapes do not wait for it.
  kubelet.reset();
  std::filesystem::remove(socket);
  text = testing::http_get_until(url, [&](const std::string& t) { return has_line(t, "joule_kubelet_up", {"} 0"}); });
  EXPECT_TRUE(has_line(text, "joule_kubelet_down_info", {"no such socket"})) << text;
  EXPECT_FALSE(has_line(text, "DCGM_FI_DEV_POWER_USAGE", {"pod="})) << text;
  SilentSocket silent(socket);
  ASSERT_TRUE(silent.ok());
  // Asked again ten steps (2 s) after it failed, and then it hangs for 1 s.
  double slowest_s = 0;
  for (int i = 0; i < 40; ++i) {
    double took_s = 0;
    text = scrape(url, &took_s);
    slowest_s = std::max(slowest_s, took_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LT(slowest_s, 0.5);
  EXPECT_TRUE(has_line(text, "joule_kubelet_up", {"} 0"})) << text;
  EXPECT_TRUE(has_line(text, "joule_kubelet_down_info", {"no answer within 1 s"})) << text;
  kill(exporter, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter, 10.0), 0) << testing::read_file(tmp.file("err"));
  reaper.waited();
}

}  // namespace
}  // namespace joule
