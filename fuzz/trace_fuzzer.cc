// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the trace readers as `joule simulate` uses them: the
// first byte picks the reader, the rest is the file.
//   even: a Zeus train trace and power trace, split at the first NUL byte
//         (no NUL: the bytes are the train trace and a fixed power trace
//         is used), loaded for one workload, strict when the byte's bit 1
//         is set;
//   odd:  a cluster trace (zeus group format or raw), its jobs read.
// What the reader hands on (names, notes, errors) goes into JSON as
// `joule simulate`'s outputs and the service's replies put such text: any
// bytes must give a trace or a joule::Error whose text is UTF-8, never a
// crash, an undefined behaviour, or another exception (dump() throws on
// invalid UTF-8, and an escaped exception aborts the target).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/simulate/cluster.h"
#include "joule/simulate/trace.h"

namespace {

const std::string kPowerTrace =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
    "toy,net,16,sgd,100,20,90\ntoy,net,16,sgd,200,15,150\ntoy,net,32,sgd,100,12,95\ntoy,net,32,sgd,200,10,180\n";
const joule::WorkloadSpec kSpec{"toy", "toy", "net", "sgd", 0.5, "metric >= 0.5", 32};

// A file of this process's own: the readers take paths.
std::string write_file(const char* name, std::string_view bytes) {
  const std::string path = "/tmp/joule-trace-fuzz-" + std::to_string(getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

void require_utf8(const std::string& text) {
  if (!joule::is_valid_utf8(text)) __builtin_trap();
}

nlohmann::json load_zeus(std::string_view files, bool strict) {
  const std::size_t nul = files.find('\0');
  const std::string train = write_file("train.csv", files.substr(0, nul));
  const std::string power =
      write_file("power.csv", nul == std::string_view::npos ? std::string_view(kPowerTrace) : files.substr(nul + 1));
  const joule::WorkloadTrace trace = joule::load_workload(train, power, kSpec, {strict});
  nlohmann::json out = {{"batch_sizes", trace.batch_sizes},
                        {"default_batch_size", trace.default_batch_size},
                        {"max_epochs", trace.max_epochs},
                        {"power_limits_w", trace.power_limits_w},
                        {"notes", trace.notes}};
  // A loaded trace is one the simulator can use: what it reads is there.
  if (trace.batch_sizes.empty() || trace.power_limits_w.empty()) __builtin_trap();
  for (const int b : trace.batch_sizes) {
    if (b <= 0 || trace.power.at(b).empty() || trace.epochs.at(b).empty()) __builtin_trap();
    out["max_limit_w"].push_back(joule::max_power_limit_w(trace, b));
  }
  if (!trace.power.count(trace.default_batch_size)) __builtin_trap();
  return out;
}

nlohmann::json read_cluster(std::string_view file) {
  const std::string path = write_file("cluster.csv", file);
  joule::ClusterTraceReader reader(path, {{"toy", "toy", 100.0}, {"big", "big-set", 1000.0}});
  nlohmann::json jobs = nlohmann::json::array();
  joule::ClusterJob job;
  for (int n = 0; n < 10000 && reader.next(job); ++n) {
    // (A raw job may last 0 s: its runtime ratio is then 0.)
    if (job.workload >= 2 || !(job.end_s >= job.submit_s) || !std::isfinite(job.end_s) || !(job.runtime_ratio >= 0) ||
        !std::isfinite(job.runtime_ratio)) {
      __builtin_trap();
    }
    jobs.push_back({{"group", std::string(job.group)}, {"workload", job.workload}, {"submit_s", job.submit_s},
                    {"end_s", job.end_s}, {"line", job.line}});
  }
  return jobs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  nlohmann::json out;
  try {
    out = data[0] % 2 == 0 ? load_zeus(rest, (data[0] & 2) != 0) : read_cluster(rest);
  } catch (const joule::Error& e) {
    // The documented outcome of a bad trace: an error naming file and line.
    require_utf8(e.what());
    out = {{"error", e.what()}};
  }
  (void)out.dump();
  return 0;
}
