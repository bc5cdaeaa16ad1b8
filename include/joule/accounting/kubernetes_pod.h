// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A Kubernetes container that holds a GPU, as the kubelet's PodResources API
// names it (scheduler/pod_resources.h reads it): the labels dcgm-exporter
// puts on a GPU's series, which the exporter puts on joule's too.
#pragma once

#include <compare>
#include <map>
#include <string>
#include <vector>

namespace joule {

struct KubernetesPod {
  std::string namespace_name;
  std::string pod;
  std::string container;
  auto operator<=>(const KubernetesPod&) const = default;
};

// The containers holding each device, by the device id the device plugin
// gave the kubelet: an NVIDIA GPU's UUID ("GPU-..."; "GPU-...::N" when the
// plugin time-slices it among several), an AMD GPU's PCI address.
using DeviceHolders = std::map<std::string, std::vector<KubernetesPod>>;

// The holders of the GPU with this uuid and PCI bus id among `holders`:
// its uuid itself, a time-sliced share of it (uuid::N), or its PCI address
// (with or without the 8-digit domain, any case).
std::vector<KubernetesPod> holders_of_gpu(const DeviceHolders& holders, const std::string& uuid,
                                          const std::string& pci_bus_id);

}  // namespace joule
