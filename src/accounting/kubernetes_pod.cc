// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/accounting/kubernetes_pod.h"

#include <algorithm>
#include <cctype>

namespace joule {
namespace {

// "00000000:18:00.0" and "0000:18:00.0" as "18:00.0", lower case: the bus
// address without its domain, as the plugins write it one way or the other.
std::string bus_address(const std::string& pci) {
  std::string address = pci;
  if (std::count(address.begin(), address.end(), ':') == 2) address = address.substr(address.find(':') + 1);
  std::transform(address.begin(), address.end(), address.begin(), [](unsigned char c) { return std::tolower(c); });
  return address;
}

}  // namespace

std::vector<KubernetesPod> holders_of_gpu(const DeviceHolders& holders, const std::string& uuid,
                                          const std::string& pci_bus_id) {
  std::vector<KubernetesPod> found;
  for (const auto& [device, pods] : holders) {
    const bool same = (!uuid.empty() && (device == uuid || device.rfind(uuid + "::", 0) == 0)) ||
                      (!pci_bus_id.empty() && bus_address(device) == bus_address(pci_bus_id));
    if (!same) continue;
    for (const KubernetesPod& pod : pods) {
      if (std::find(found.begin(), found.end(), pod) == found.end()) found.push_back(pod);
    }
  }
  return found;
}

}  // namespace joule
