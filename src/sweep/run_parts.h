// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The parts of running a sweep that its files share (private to the sweep
// module): where a run's files go, stopping, a run's record from what it
// left (run_record.cc), a run across nodes (cluster_run.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "joule/common/child_process.h"
#include "joule/control/devices.h"
#include "joule/measure/monitor.h"
#include "joule/sweep/sweep.h"
#include "sweep/store.h"

namespace joule {

// "gpu0 (NVIDIA A40)", "gpu1 (Simulated GPU (H100-like), simulated)" (grid_check.cc).
std::string gpu_words(Gpu& gpu);

// The store's directory made absolute: run files beside it reach every node.
std::string absolute_path(const std::string& path);

// The sweep's GPUs are simulated (--backend sim): its runs say so.
bool sweep_simulates(const SweepOptions& options);

// The variables that give a run its GPUs, each vendor's runtime counting its
// own: CUDA_VISIBLE_DEVICES for NVIDIA GPUs, HIP_VISIBLE_DEVICES for AMD ones.
std::vector<std::pair<std::string, std::string>> visible_devices_env(const Devices& sweep_devices,
                                                                     const std::vector<std::shared_ptr<Gpu>>& run_gpus);

// The signal that stopped the sweep (0: none), waiting for a run under it,
// and a run it cut short recorded as interrupted (sweep.cc).
int stop_signal();
int wait_for_run(ChildProcess& child, double kill_grace_s);
void note_stop(sweep::RunRecord& record);

// A run's counts ("samples=N steps=M epochs=K" lines it appended to its
// report file), and its utilisation and power timeline from this machine's
// monitor or from the nodes' timeline files (run_record.cc).
void read_counts(const std::string& path, sweep::RunRecord& record);
void summarize_timeline(Monitor& monitor, const Measurement& m, sweep::RunRecord& record);
void read_node_timelines(const std::string& timeline_path, sweep::RunRecord& record);

// One run across nodes (cluster_run.cc).
sweep::RunRecord run_across_nodes(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                                  const std::string& store_path, long long id, double kill_grace_s);

}  // namespace joule
