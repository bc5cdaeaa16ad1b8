// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The exporter's Kubernetes series (joule exporter --kubelet-socket): each
// container's energy on the GPUs it held, and whether the kubelet answered.
#include <fmt/format.h>

#include "joule/telemetry/energy_exporter.h"
#include "telemetry/prometheus_text.h"

namespace joule {

using prometheus_text::escaped;
using prometheus_text::Family;
using prometheus_text::pod_labels;

void EnergyExporter::render_pod_metrics(std::string& out) const {
  if (!options_.list_gpu_holders) return;
  {
    Family family(out, "joule_kubelet_up", "gauge",
                  "1 when the kubelet's PodResources answered the last accounting step that asked it (--kubelet-socket); "
                  "0 while it does not, when no container is billed for any GPU.");
    const bool up = kubelet_asked_ && !kubelet_problem_;
    family.add(fmt::format(R"(socket="{}",Hostname="{}")", escaped(options_.kubelet_socket), escaped(options_.hostname)),
               up ? 1 : 0);
  }
  if (kubelet_problem_) {
    Family family(out, "joule_kubelet_down_info", "gauge", "Why the kubelet's PodResources did not answer, in `reason`.");
    family.add(fmt::format(R"(socket="{}",reason="{}",Hostname="{}")", escaped(options_.kubelet_socket),
                           escaped(*kubelet_problem_), escaped(options_.hostname)),
               1);
  }
  Family family(out, "joule_pod_gpu_energy_joules_total", "counter",
                "GPU energy per Kubernetes container (namespace, pod, container), from each accounting step of the "
                "GPUs the kubelet says it holds; a GPU time-sliced among several is split equally (J).");
  for (const auto& [key, energy_j] : ledger_.pod_gpu_energy_j()) {
    const Gpu& gpu = *gpus_[key.gpu];
    family.add(fmt::format(R"(gpu="{}",UUID="{}",Hostname="{}"{})", gpu.index(), escaped(gpu.uuid()),
                           escaped(options_.hostname), pod_labels(key.pod)),
               energy_j);
  }
}

}  // namespace joule
