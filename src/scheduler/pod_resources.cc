// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/scheduler/pod_resources.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>

#include "joule/common/utf8.h"
#include "joule/error.h"
#include "scheduler/kubelet_pod_resources.grpc.pb.h"

namespace joule {
namespace {

// A node's list is small; the kubelet's own limit for it is 16 MiB.
constexpr int kMaxReplyBytes = 16 << 20;

}  // namespace

struct PodResourcesClient::Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

bool is_gpu_resource(const std::string& resource_name) {
  for (const char* vendor : {"nvidia.com/", "amd.com/"}) {
    if (resource_name.rfind(vendor, 0) != 0) continue;
    const std::string kind = resource_name.substr(std::string(vendor).size());
    return kind == "gpu" || kind.rfind("gpu.", 0) == 0 || kind.rfind("mig-", 0) == 0;
  }
  return false;
}

PodResourcesClient::PodResourcesClient(std::string socket_path, double timeout_s)
    : socket_path_(std::move(socket_path)), timeout_s_(timeout_s) {}

PodResourcesClient::~PodResourcesClient() = default;

DeviceHolders PodResourcesClient::list_gpu_holders() {
  const std::string where = fmt::format("the kubelet's pod resources at {}", printable(socket_path_));
  struct stat info {};
  if (stat(socket_path_.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) {
    throw Error(fmt::format("{}: no such socket (is this a Kubernetes node, and the socket mounted into the exporter?)",
                            where));
  }
  if (!channel_) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(kMaxReplyBytes);
    auto channel = grpc::CreateCustomChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials(), arguments);
    channel_ = std::make_unique<Channel>(Channel{channel, v1::PodResourcesLister::NewStub(channel)});
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s_)));
  v1::ListPodResourcesResponse reply;
  const grpc::Status status = channel_->stub->List(&context, v1::ListPodResourcesRequest(), &reply);
  if (!status.ok()) {
    throw Error(fmt::format("{}: {} ({})", where,
                            status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                                ? fmt::format("no answer within {:g} s", timeout_s_)
                                : printable(status.error_message()),
                            static_cast<int>(status.error_code())));
  }
  DeviceHolders holders;
  for (const v1::PodResources& pod : reply.pod_resources()) {
    for (const v1::ContainerResources& container : pod.containers()) {
      for (const v1::ContainerDevices& devices : container.devices()) {
        if (!is_gpu_resource(devices.resource_name())) continue;
        for (const std::string& id : devices.device_ids()) {
          holders[id].push_back({pod.namespace_(), pod.name(), container.name()});
        }
      }
    }
  }
  return holders;
}

}  // namespace joule
