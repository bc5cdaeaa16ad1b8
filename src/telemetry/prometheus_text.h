// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Writing the Prometheus text format (version 0.0.4): label values escaped,
// and a metric family's HELP and TYPE written once before its samples. Used
// by the exporter's renderers (energy_exporter.cc, amd_metric_names.cc, pod_metrics.cc).
#pragma once

#include <fmt/format.h>

#include <string>

#include "joule/accounting/kubernetes_pod.h"
#include "joule/common/utf8.h"

namespace joule::prometheus_text {

// A label value as the text format wants it: UTF-8 with \, " and newlines
// escaped. Label values come from outside (driver names, /proc, jouled's
// lease holders): bytes that are not UTF-8 are written as \xHH (printable),
// so one odd process or driver string cannot make the whole scrape invalid.
inline std::string escaped(const std::string& value) {
  const std::string text = valid_utf8_or_printable(value);
  std::string out;
  for (const char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// dcgm-exporter's labels of a GPU a Kubernetes container holds, with the
// comma that joins them to the labels before.
inline std::string pod_labels(const KubernetesPod& pod) {
  return fmt::format(R"(,namespace="{}",pod="{}",container="{}")", escaped(pod.namespace_name), escaped(pod.pod),
                     escaped(pod.container));
}

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string& out, const char* name, const char* type, const char* help) : out_(out), name_(name) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void add(const std::string& labels, double value) { out_ += fmt::format("{}{{{}}} {}\n", name_, labels, value); }

 private:
  std::string& out_;
  const char* name_;
};

}  // namespace joule::prometheus_text
