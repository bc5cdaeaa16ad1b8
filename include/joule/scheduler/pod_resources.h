// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Which Kubernetes containers hold which GPUs, from the kubelet's
// PodResources API (gRPC, v1 List, on the kubelet's pod-resources socket,
// /var/lib/kubelet/pod-resources/kubelet.sock): each container's devices
// whose resource is a GPU (nvidia.com/gpu, amd.com/gpu and their shared
// variants), by device id. The exporter asks it at its accounting steps
// (joule exporter --kubelet-socket).
#pragma once

#include <memory>
#include <string>

#include "joule/accounting/kubernetes_pod.h"

namespace joule {

class PodResourcesClient {
 public:
  // Nothing is connected until list(): a kubelet that starts later is found.
  explicit PodResourcesClient(std::string socket_path, double timeout_s = 1.0);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  // One List call, answered within the timeout. Throws Error naming the
  // socket and why: it is missing, nothing answers, the answer is late or
  // not a PodResources list.
  DeviceHolders list_gpu_holders();

  const std::string& socket_path() const { return socket_path_; }

 private:
  struct Channel;
  std::string socket_path_;
  double timeout_s_;
  std::unique_ptr<Channel> channel_;
};

// Whether a device plugin's resource name is a GPU's: nvidia.com/gpu,
// amd.com/gpu, and their shared or MIG variants (nvidia.com/gpu.shared,
// nvidia.com/mig-1g.10gb).
bool is_gpu_resource(const std::string& resource_name);

}  // namespace joule
