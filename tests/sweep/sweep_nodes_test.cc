// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Sweeps whose runs span nodes (gpus_per_node with launcher mpirun or srun):
// the config keys and their errors, the launcher lines, a real sweep under
// Open MPI with ranks posing as two nodes (JOULE_RANKS_PER_NODE), a stand-in
// launcher whose job loses a node, and stores of earlier joule versions.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/test_support.h"
#include "sweep/load_error.h"
#include "joule/analyze/report.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace joule {
namespace {

using testing::read_lines;
using testing::run_process;
using testing::TempDir;
using testing::write_file;

using testing::sweep_load_error;

TEST(SweepNodesConfigTest, KeysAndWhatTheyRefuse) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"train\"\nlauncher = \"srun\"\ngpus_per_node = 8\n"
                                 "launcher_options = [\"--partition\", \"gpu a\"]\n[grid]\ngpus = [1, 8, 16]\n");
  const SweepConfig c = SweepConfig::load(tmp.file("s.toml"));
  EXPECT_TRUE(c.across_nodes());
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.launcher_options, (std::vector<std::string>{"--partition", "gpu a"}));
  write_file(tmp.file("t.toml"), "command = \"x\"\nlauncher = \"mpirun\"\nlauncher_options = \"--oversubscribe  --map-by slot\"\n");
  EXPECT_EQ(SweepConfig::load(tmp.file("t.toml")).launcher_options,
            (std::vector<std::string>{"--oversubscribe", "--map-by", "slot"}));
  EXPECT_FALSE(SweepConfig::load(tmp.file("t.toml")).across_nodes());

  EXPECT_EQ(sweep_load_error("command = \"x\"\ngpus_per_node = 2\n"),
            "s.toml:2:17: \"gpus_per_node\" spreads runs across nodes, which needs launcher = \"mpirun\" or \"srun\" "
            "(not \"local\")");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher = \"srun\"\ngpus_per_node = 0\n"),
            "s.toml:3:17: \"gpus_per_node\" must be a whole number from 1 to 4096");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher = \"mpirun\"\ngpus_per_node = 4\n[grid]\ngpus = [2, 6]\n"),
            "s.toml:5:12: grid.gpus: 6 GPUs is not a whole number of nodes of gpus_per_node = 4 (a run across nodes "
            "uses all of each node's 4 GPUs)");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher_options = \"-N 2\"\n"),
            "s.toml:2:20: \"launcher_options\" are for launcher = \"mpirun\" or \"srun\"");
  // GPU settings are changed only where the sweep runs: refused, with what to do instead.
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher = \"srun\"\ngpus_per_node = 4\n[grid]\ngpus = [4, 8]\n"
                       "power_limit = [300, 200]\n"),
            "s.toml:6:16: grid.power_limit cannot be swept with gpus_per_node: joule sweep changes GPU settings only on "
            "the machine it runs on, and these runs run on the nodes srun picks. Set it on every node before the "
            "sweep (nvidia-smi, or jouled), or sweep power_limit in runs on this machine (remove gpus_per_node)");
}

TEST(SweepNodesConfigTest, LayoutIsWholeNodesOfOneRankPerGpu) {
  SweepConfig c;
  c.gpus_per_node = 8;
  auto layout = [&](const std::string& gpus) { return node_layout(c, SweepPoint{{{"gpus", gpus}}, 0}); };
  EXPECT_EQ(layout("1").nodes, 1);
  EXPECT_EQ(layout("1").ranks_per_node, 1);
  EXPECT_EQ(layout("8").nodes, 1);
  EXPECT_EQ(layout("8").ranks_per_node, 8);
  EXPECT_EQ(layout("32").nodes, 4);
  EXPECT_EQ(layout("32").ranks_per_node, 8);
  EXPECT_EQ(node_layout(c, SweepPoint{{}, 0}).gpus, 1);  // no gpus key: one GPU
}

// The launcher lines, word for word: what a user's cluster sees.
TEST(SweepNodesConfigTest, SrunAndMpirunLaunchJouleMeasureOnEveryRank) {
  SweepConfig c;
  c.path = "s.toml";
  c.command = "python3 train.py --bs {batch} --gpus {gpus}";
  c.gpus_per_node = 8;
  c.launcher = "srun";
  c.launcher_options = {"--partition", "gpu", "--mpi=pmix"};
  ClusterLaunch launch;
  launch.joule_binary = "/opt/joule/bin/joule";
  launch.report_path = "/shared/s.sqlite.run7.json";
  launch.timeline_path = "/shared/s.sqlite.run7.timeline.csv";
  launch.measure_options = {"--backend", "nvml"};
  launch.forwarded_env = {"JOULE_RANKS_PER_NODE"};
  launch.as_root = true;
  const SweepPoint point{{{"gpus", "16"}, {"batch", "64"}}, 0};
  EXPECT_EQ(cluster_run_argv(c, point, launch),
            (std::vector<std::string>{"srun", "--nodes", "2", "--ntasks", "16", "--ntasks-per-node", "8",
                                      "--partition", "gpu", "--mpi=pmix", "/opt/joule/bin/joule", "measure", "--mpi",
                                      "--json", "--output", "/shared/s.sqlite.run7.json", "--timeline",
                                      "/shared/s.sqlite.run7.timeline.csv", "--sample", "util", "--backend", "nvml", "--",
                                      "/bin/sh", "-c", "python3 train.py --bs 64 --gpus 16"}));
  EXPECT_EQ(shell_join(cluster_run_argv(c, SweepPoint{{{"gpus", "2"}, {"batch", "8"}}, 0}, launch)),
            "srun --nodes 1 --ntasks 2 --ntasks-per-node 2 --partition gpu --mpi=pmix /opt/joule/bin/joule measure "
            "--mpi --json --output /shared/s.sqlite.run7.json --timeline /shared/s.sqlite.run7.timeline.csv --sample "
            "util --backend nvml -- /bin/sh -c "
            "'python3 train.py --bs 8 --gpus 2'");
  c.launcher = "mpirun";
  c.launcher_options = {"--hostfile", "hosts"};
  EXPECT_EQ(cluster_run_argv(c, point, launch),
            (std::vector<std::string>{"mpirun", "-np", "16", "--map-by", "ppr:8:node", "--allow-run-as-root", "-x",
                                      "JOULE_REPORT_FILE", "-x", "CUDA_VISIBLE_DEVICES", "-x", "JOULE_RANKS_PER_NODE",
                                      "--hostfile", "hosts", "/opt/joule/bin/joule", "measure", "--mpi", "--json",
                                      "--output", "/shared/s.sqlite.run7.json", "--timeline",
                                      "/shared/s.sqlite.run7.timeline.csv", "--sample", "util", "--gpus", "0,1,2,3,4,5,6,7",
                                      "--backend", "nvml", "--", "/bin/sh", "-c",
                                      "python3 train.py --bs 64 --gpus 16"}));
  launch.as_root = false;
  const auto one = cluster_run_argv(c, SweepPoint{{{"gpus", "1"}, {"batch", "8"}}, 0}, launch);
  EXPECT_EQ(std::vector<std::string>(one.begin(), one.begin() + 5),
            (std::vector<std::string>{"mpirun", "-np", "1", "--map-by", "ppr:1:node"}));
  EXPECT_EQ(std::count(one.begin(), one.end(), "--allow-run-as-root"), 0);
  EXPECT_NE(std::find(one.begin(), one.end(), "0"), one.end());  // --gpus 0
  EXPECT_EQ(shell_join({"a b", "it's", "plain-1,2:x"}), "'a b' 'it'\\''s' plain-1,2:x");
}

// The joule binary the ranks run is this program unless told: for a test
// binary, set it; the report file is absolute, beside the store.
TEST(SweepNodesConfigTest, TheLaunchComesFromTheSweepsOptions) {
  SweepOptions options;
  options.discovery.backend = GpuBackend::kSim;
  options.discovery.sim_spec = "count=2";
  options.joule_binary = "/usr/bin/joule";
  const ClusterLaunch launch = cluster_launch_of(options, "rel/s.sqlite", "12");
  EXPECT_EQ(launch.joule_binary, "/usr/bin/joule");
  EXPECT_EQ(launch.report_path, std::filesystem::current_path().string() + "/rel/s.sqlite.run12.json");
  EXPECT_EQ(launch.measure_options, (std::vector<std::string>{"--backend", "sim", "--sim", "count=2"}));
  options.joule_binary.clear();
  EXPECT_EQ(cluster_launch_of(options, "s.sqlite", "1").joule_binary,
            std::filesystem::read_symlink("/proc/self/exe").string());
}

sqlite3* open_db(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  return db;
}

// Rows of a query, each column as text ("" for NULL).
std::vector<std::vector<std::string>> rows_of(const std::string& path, const std::string& sql) {
  sqlite3* db = open_db(path);
  sqlite3_stmt* s = nullptr;
  std::vector<std::vector<std::string>> rows;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (s && sqlite3_step(s) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(s); ++c) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
      row.push_back(text ? text : "");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

// A directory holding a stand-in for `mpirun` or `srun`: it records its
// arguments, then writes the job's report where --output says, as rank 0 of
// `joule measure --mpi` would: two simulated nodes of 2 GPUs each at 300 W
// for 0.5 s, except that a job of 4 ranks loses node-b.
std::string fake_launcher(const TempDir& tmp, const std::string& name) {
  const std::string dir = tmp.file("bin");
  std::filesystem::create_directories(dir);
  write_file(dir + "/" + name, R"SH(#!/bin/sh
printf '%s\n' "$@" > "$FAKE_LAUNCHER_LOG.$$"
ranks=1; out=
while [ $# -gt 0 ]; do
  case "$1" in
    -np|--ntasks) ranks=$2; shift ;;
    --output) out=$2; shift ;;
    --timeline) timeline=$2; shift ;;
  esac
  shift
done
node() { printf '{"node":"%s","ranks":[%s],"elapsed_s":0.5,"devices":[{"kind":"gpu","name":"gpu0 sim","energy_j":150},{"kind":"gpu","name":"gpu1 sim","energy_j":150},{"kind":"cpu_package","name":"package-0","energy_j":20}],"warnings":[],"total_energy_j":320}' "$1" "$2"; }
if [ "$ranks" = 4 ]; then
  nodes="$(node node-a 0,1)"; missing='"node-b (rank 2): did not report within 60 s"'
elif [ "$ranks" = 6 ]; then
  nodes="$(node node-a 0,1),$(node node-b 2,3 | sed 's/"warnings":\[\]/"warnings":["gpu1 failed: GPU is lost"],"devices_failed":true/'),$(node node-c 4,5)"; missing=
else
  nodes="$(node node-a 0,1)"; missing=
fi
for n in node-a node-b node-c; do  # each reported node's leader writes its timeline
  case "$nodes" in *"\"$n\""*)
    printf 'time_s,device,power_w,gpu_util_percent,memory_util_percent,sm_clock_mhz,temperature_c,memory_used_bytes\n7.0,gpu0,300.000,90,40,,,\n7.25,gpu0,300.000,80,40,,,\n7.5,gpu0,300.000,70,40,,,\n' > "${timeline%.csv}.$n.csv" ;;
  esac
done
printf '{"window":"command","world_size":%s,"nodes":[%s],"missing_nodes":[%s],"elapsed_s":0.5,"edge_skew_s":0,"gpu_energy_j":0,"cpu_package_energy_j":0,"dram_energy_j":0,"total_energy_j":0,"command":[]}\n' "$ranks" "$nodes" "$missing" > "$out"
echo samples=5 >> "$JOULE_REPORT_FILE"
exit 0
)SH");
  std::filesystem::permissions(dir + "/" + name, std::filesystem::perms::owner_all);
  return dir;
}

std::string path_with(const std::string& dir) { return dir + ":" + std::getenv("PATH"); }

// Simulated GPUs only, and the stand-in launcher `name` first on PATH,
// logging its arguments beside tmp's "argv".
std::map<std::string, std::string> env_with_fake_launcher(const TempDir& tmp, const std::string& name) {
  auto env = testing::simulated_only_env();
  env["PATH"] = path_with(fake_launcher(tmp, name));
  env["FAKE_LAUNCHER_LOG"] = tmp.file("argv");
  return env;
}

// A job that loses a node's report: the run is kept as partial (its node
// rows and totals for the nodes that reported, the missing node named), not
// used by the analysis, and run again when the sweep resumes.
TEST(SweepNodesCliTest, ARunThatLosesANodeIsPartialAndNamesTheNode) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"sleep 0\"\nlauncher = \"mpirun\"\ngpus_per_node = 2\n[grid]\ngpus = [2, 4]\n");
  const auto env = env_with_fake_launcher(tmp, "mpirun");
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=2"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // a run not ok
  EXPECT_NE(r.out.find("2 runs in the grid; 2 ran (1 failed)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("joule sweep: run 2 is partial: node missing: node-b (rank 2): did not report within 60 s"),
            std::string::npos)
      << r.err;
  const std::string store = tmp.file("s.sqlite");
  const auto runs = rows_of(store, "SELECT id, status, nodes, gpu_energy_j, cpu_energy_j, samples, error FROM runs");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0][1], "ok");
  EXPECT_EQ(runs[0][2], "1");
  EXPECT_EQ(runs[1][1], "partial");
  EXPECT_EQ(runs[1][2], "2");  // launched on two nodes
  EXPECT_EQ(std::stod(runs[1][3]), 300.0);  // the node that reported: its totals, not the report's zeros
  EXPECT_EQ(std::stod(runs[1][4]), 20.0);
  EXPECT_EQ(std::stod(runs[1][5]), 5.0);  // the counts the run wrote to $JOULE_REPORT_FILE
  EXPECT_EQ(runs[1][6], "node missing: node-b (rank 2): did not report within 60 s; the totals cover 1 of 2 nodes");
  EXPECT_EQ(rows_of(store, "SELECT node, ranks, gpus FROM run_nodes WHERE run_id = 2"),
            (std::vector<std::vector<std::string>>{{"node-a", "0,1", "2"}}));
  // Each reporting node's timeline (its leader's file, removed once read):
  // power per "<node> <device>" from the node's first sample, utilisation.
  EXPECT_EQ(rows_of(store, "SELECT time_s, device, power_w FROM timelines WHERE run_id = 2"),
            (std::vector<std::vector<std::string>>{
                {"0.0", "node-a gpu0", "300.0"}, {"0.25", "node-a gpu0", "300.0"}, {"0.5", "node-a gpu0", "300.0"}}));
  EXPECT_EQ(rows_of(store, "SELECT gpu_util_mean, mem_util_mean FROM runs WHERE id = 2"),
            (std::vector<std::vector<std::string>>{{"80.0", "40.0"}}));
  EXPECT_FALSE(std::filesystem::exists(store + ".run2.timeline.node-a.csv"));

  // The analysis leaves it out and says so; the report lists it.
  const auto text = run_process({JOULE_BINARY, "analyze", store});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("partial runs (a device's or node's measurement missing; not used above):\n  gpus=4"), std::string::npos)
      << text.out;
  const auto runs_read = load_sweep_runs(store);
  const SweepAnalysis a = analyze_sweep(runs_read);
  ASSERT_EQ(a.configs.size(), 1u);  // gpus=4 has no successful run
  const std::string html = render_report("t", runs_read, a, {});
  EXPECT_NE(html.find("node-b (rank 2): did not report within 60 s"), std::string::npos);

  // What the launcher was given: joule measure --mpi on every rank, the run's report beside the store.
  std::vector<std::string> logs;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    if (e.path().filename().string().rfind("argv.", 0) == 0) logs.push_back(e.path());
  }
  ASSERT_EQ(logs.size(), 2u);
  bool saw_four = false;
  for (const auto& log : logs) {
    const auto argv = read_lines(log);
    if (std::find(argv.begin(), argv.end(), "4") == argv.end()) continue;
    saw_four = true;
    const std::string line = [&] {
      std::string l;
      for (const auto& word : argv) l += (l.empty() ? "" : " ") + word;
      return l;
    }();
    EXPECT_NE(line.find("-np 4 --map-by ppr:2:node"), std::string::npos) << line;
    EXPECT_NE(line.find(std::string(" measure --mpi --json --output ") + store + ".run2.json --timeline " + store +
                        ".run2.timeline.csv --sample util --gpus 0,1 --sim count=2 -- /bin/sh -c sleep 0"),
              std::string::npos)
        << line;
  }
  EXPECT_TRUE(saw_four);
  EXPECT_FALSE(std::filesystem::exists(store + ".run2.json"));  // read, then removed

  // Resumed: the partial run is run again, the ok one is not.
  const auto again = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=2"}, env);
  EXPECT_NE(again.out.find("2 runs in the grid; 1 ran (1 failed), 1 already in"), std::string::npos) << again.out;
}

// A node that lost a GPU inside the window reported a short energy: partial.
TEST(SweepNodesCliTest, ARunWhoseNodeLostADeviceIsPartial) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"true\"\nlauncher = \"mpirun\"\ngpus_per_node = 2\n[grid]\ngpus = [6]\n");
  const auto env = env_with_fake_launcher(tmp, "mpirun");
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml")}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto runs = rows_of(tmp.file("s.sqlite"), "SELECT status, nodes, gpu_energy_j, error FROM runs");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0][0], "partial");
  EXPECT_EQ(runs[0][1], "3");
  EXPECT_EQ(std::stod(runs[0][2]), 900.0);
  EXPECT_EQ(runs[0][3], "node node-b lost a device inside the window: its energy stops there; node node-b: gpu1 "
                        "failed: GPU is lost");
  EXPECT_EQ(rows_of(tmp.file("s.sqlite"), "SELECT node, warnings FROM run_nodes WHERE node = 'node-b'"),
            (std::vector<std::vector<std::string>>{{"node-b", "gpu1 failed: GPU is lost"}}));
}

// Under srun the sweep leaves the GPUs to Slurm (no --gpus), and a report
// that never came is a failed run that says where it was expected.
TEST(SweepNodesCliTest, SrunRunsAndAMissingReportIsAFailedRun) {
  TempDir tmp;
  write_file(tmp.file("s.toml"),
             "command = \"true\"\nlauncher = \"srun\"\ngpus_per_node = 2\nlauncher_options = \"--exclusive\"\n"
             "[grid]\ngpus = [2]\n");
  const auto env = env_with_fake_launcher(tmp, "srun");
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto runs = rows_of(tmp.file("s.sqlite"), "SELECT status, nodes, command FROM runs");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0][0], "ok");
  EXPECT_EQ(runs[0][2].rfind("srun --nodes 1 --ntasks 2 --ntasks-per-node 2 --exclusive " + std::string(JOULE_BINARY) +
                                 " measure --mpi --json --output " + tmp.file("s.sqlite") + ".run1.json --timeline " +
                                 tmp.file("s.sqlite") + ".run1.timeline.csv --sample util --backend sim -- "
                                 "/bin/sh -c true",
                             0),
            0u)
      << runs[0][2];

  // A launcher that writes nothing: failed, the file named.
  write_file(tmp.file("bin/srun"), "#!/bin/sh\nexit 7\n");
  write_file(tmp.file("s.toml"), "command = \"true\"\nlauncher = \"srun\"\ngpus_per_node = 2\nstore = \"t.sqlite\"\n");
  const auto none = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml")}, env);
  EXPECT_EQ(none.exit_code, 1);
  const auto failed = rows_of(tmp.file("t.sqlite"), "SELECT status, exit_code, error FROM runs");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0][0], "failed");
  EXPECT_EQ(failed[0][1], "7");
  EXPECT_EQ(failed[0][2], "no report from the run's ranks at " + tmp.file("t.sqlite") +
                              ".run1.json (srun exited with status 7; rank 0 writes it: is the store's directory on a "
                              "filesystem every node shares?)");
}

TEST(SweepNodesCliTest, AKnobInASweepAcrossNodesIsRefusedBeforeAnything) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"true\"\nlauncher = \"mpirun\"\ngpus_per_node = 2\n[grid]\ngpus = [2, 4]\n"
                                 "sm_clock_mhz = [1980, 1410]\n");
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, testing::simulated_only_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(tmp.file("s.toml") + ":6:17: grid.sm_clock_mhz cannot be swept with gpus_per_node"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Set it on every node before the sweep"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("s.sqlite")));
}

// A store written before per-node rows: analysed as it is (read only, one
// node per run), and brought up to date when a sweep opens it.
TEST(SweepNodesStoreTest, AStoreFromBeforeNodeRowsIsReadAndGetsThemWhenASweepOpensIt) {
  TempDir tmp;
  const std::string store = tmp.file("s.sqlite");
  sqlite3* db = open_db(store);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE runs (id INTEGER PRIMARY KEY, sweep TEXT NOT NULL, config TEXT NOT NULL, repeat "
                         "INTEGER NOT NULL, command TEXT NOT NULL, status TEXT NOT NULL, exit_code INTEGER, started_at "
                         "REAL, finished_at REAL, elapsed_s REAL, gpu_energy_j REAL, cpu_energy_j REAL, dram_energy_j "
                         "REAL, avg_power_w REAL, samples REAL, steps REAL, epochs REAL, gpu_util_mean REAL, gpu_util_cv "
                         "REAL, mem_util_mean REAL, mem_util_cv REAL, error TEXT);"
                         "CREATE TABLE timelines (run_id INTEGER NOT NULL, time_s REAL NOT NULL, device TEXT NOT NULL, "
                         "power_w REAL NOT NULL);"
                         "INSERT INTO runs (sweep, config, repeat, command, status, exit_code, elapsed_s, gpu_energy_j,"
                         " cpu_energy_j, dram_energy_j) VALUES"
                         " ('s.toml', '{\"gpus\":\"1\"}', 0, 'true', 'ok', 0, 10, 3000, 0, 0),"
                         " ('s.toml', '{\"gpus\":\"2\"}', 0, 'true', 'ok', 0, 6, 3600, 0, 0);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  const auto old = load_sweep_runs(store);
  ASSERT_EQ(old.size(), 2u);
  EXPECT_EQ(old[1].nodes, 1);
  EXPECT_TRUE(old[1].node_parts.empty());
  const SweepAnalysis a = analyze_sweep(old);
  ASSERT_EQ(a.scaling.size(), 1u);
  ASSERT_EQ(a.scaling[0].points.size(), 2u);
  // 3600 J on 2 GPUs in 6 s: 3600 / 3600 Wh / (2 x 6 / 3600 h) = 300 Wh per GPU-hour.
  EXPECT_NEAR(a.scaling[0].points[1].wh_per_gpu_hour, 300.0, 1e-9);
  EXPECT_NEAR(a.scaling[0].points[0].wh_per_gpu_hour, 300.0, 1e-9);
  EXPECT_NEAR(a.scaling[0].points[1].speedup, 10.0 / 6.0, 1e-12);
  ASSERT_TRUE(a.scaling[0].energy);
  EXPECT_NEAR(-a.scaling[0].energy->b, std::log2(3600.0 / 3000.0), 1e-9);  // E = a N^c through both points
  EXPECT_TRUE(rows_of(store, "SELECT name FROM sqlite_master WHERE name = 'run_nodes'").empty());  // read only

  // A dry run's plan leaves it as it is too.
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\ngpus = [1, 2, 4]\n");
  SweepConfig plan_config = SweepConfig::load(tmp.file("s.toml"));
  const SweepPlan plan = plan_sweep(plan_config, store);
  EXPECT_EQ(plan.finished, 2);  // read from the old rows
  EXPECT_TRUE(rows_of(store, "SELECT name FROM sqlite_master WHERE name = 'run_nodes'").empty());

  // A sweep on it: the table and the column added, the old runs kept (one node each).
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\ngpus = [1, 2, 4]\n");
  SweepOptions options;
  options.discovery.backend = GpuBackend::kSim;
  options.discovery.sim_spec = "count=4,load=0.5";
  options.discovery.powercap_root = "/nonexistent";
  options.log = [](const std::string&) {};
  const SweepSummary s = run_sweep(SweepConfig::load(tmp.file("s.toml")), options);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.ran, 1);
  EXPECT_EQ(rows_of(store, "SELECT id, nodes FROM runs"),
            (std::vector<std::vector<std::string>>{{"1", ""}, {"2", ""}, {"3", "1"}}));
  const auto node_rows = rows_of(store, "SELECT run_id, ranks, gpus FROM run_nodes");
  EXPECT_EQ(node_rows, (std::vector<std::vector<std::string>>{{"3", "", "4"}}));  // a run here: this machine, its 4 GPUs
  export_sweep_csv(store, tmp.file("runs.csv"));
  const auto csv = read_lines(tmp.file("runs.csv"));
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[0].substr(csv[0].rfind(',')), ",nodes");
  EXPECT_EQ(csv[1].substr(csv[1].rfind(',')), ",1");  // NULL reads as the one node it ran on
  EXPECT_EQ(export_sweep_nodes_csv(store, tmp.file("nodes.csv")), 1);
  EXPECT_EQ(read_lines(tmp.file("nodes.csv"))[0],
            "run_id,node,ranks,gpus,elapsed_s,gpu_energy_j,cpu_energy_j,dram_energy_j,warnings");
  const auto runs = load_sweep_runs(store);
  ASSERT_EQ(runs.size(), 3u);
  ASSERT_EQ(runs[2].node_parts.size(), 1u);
  EXPECT_DOUBLE_EQ(runs[2].node_parts[0].gpu_energy_j, runs[2].gpu_energy_j);
  // One node in all: the report has no node section.
  EXPECT_EQ(render_report("t", runs, analyze_sweep(runs), {}).find("<h2>Nodes</h2>"), std::string::npos);
}

#ifdef JOULE_TEST_MPIEXEC
// The whole path under a real Open MPI: ranks of this machine pose as nodes
// of 2 ranks (JOULE_RANKS_PER_NODE), each node with 2 simulated GPUs at
// 360 W. Runs of 1 and 2 GPUs span one node, of 4 GPUs two; every node of
// every run is measured, the store holds per-node rows whose sums are the
// run's totals, and the analysis and report show the scaling.
TEST(SweepNodesCliTest, MpirunSweepMeasuresEveryNodeOfEveryRunAndShowsTheScaling) {
  TempDir tmp;
  write_file(tmp.file("s.toml"),
             "command = \"sleep 0.3; echo samples=8 >> $JOULE_REPORT_FILE\"\nlauncher = \"mpirun\"\nrepeats = 2\n"
             "gpus_per_node = 2\n"
             "# one machine: more ranks than cores, all of them here (the last --map-by wins)\n"
             "launcher_options = \"--oversubscribe --map-by slot\"\n[grid]\ngpus = [1, 2, 4]\n");
  auto env = testing::simulated_only_env();
  env["JOULE_RANKS_PER_NODE"] = "2";
  env["JOULE_NODE_NAME"] = "box";
  env["PATH"] = path_with(std::filesystem::path(JOULE_TEST_MPIEXEC).parent_path());
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=2,load=0.5", "--export",
                              tmp.file("runs.csv")},
                             env, 300.0);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("6 runs in the grid; 6 ran (0 failed)"), std::string::npos) << r.out;
  const std::string store = tmp.file("s.sqlite");

  const auto runs = rows_of(store,
                            "SELECT id, config, status, nodes, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j,"
                            " samples FROM runs ORDER BY id");
  ASSERT_EQ(runs.size(), 6u);
  for (const auto& run : runs) {
    const int gpus = std::stoi(nlohmann::json::parse(run[1])["gpus"].get<std::string>());
    SCOPED_TRACE(run[1]);
    EXPECT_EQ(run[2], "ok");
    EXPECT_EQ(run[3], gpus == 4 ? "2" : "1");
    const auto nodes = rows_of(store, "SELECT node, ranks, gpus, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j"
                                      " FROM run_nodes WHERE run_id = " + run[0] + " ORDER BY node");
    if (gpus == 4) {
      ASSERT_EQ(nodes.size(), 2u);
      EXPECT_EQ(nodes[0][0], "box-0");
      EXPECT_EQ(nodes[0][1], "0,1");
      EXPECT_EQ(nodes[1][0], "box-1");
      EXPECT_EQ(nodes[1][1], "2,3");
    } else {
      ASSERT_EQ(nodes.size(), 1u);
      EXPECT_EQ(nodes[0][0], "box-0");
      EXPECT_EQ(nodes[0][1], gpus == 1 ? "0" : "0,1");
    }
    double gpu_j = 0, cpu_j = 0, dram_j = 0, longest_s = 0;
    for (const auto& n : nodes) {
      EXPECT_EQ(n[2], std::to_string(std::min(gpus, 2)));  // each node measures the GPUs the run uses there
      longest_s = std::max(longest_s, std::stod(n[3]));
      gpu_j += std::stod(n[4]);
      cpu_j += std::stod(n[5]);
      dram_j += std::stod(n[6]);
    }
    EXPECT_NEAR(std::stod(run[5]), gpu_j, 1e-9);  // the run's totals are its nodes' sums
    EXPECT_NEAR(std::stod(run[6]), cpu_j, 1e-9);
    EXPECT_NEAR(std::stod(run[7]), dram_j, 1e-9);
    EXPECT_DOUBLE_EQ(std::stod(run[4]), longest_s);
    const double elapsed = std::stod(run[4]);
    EXPECT_GE(elapsed, 0.3);
    EXPECT_NEAR(gpu_j, 360.0 * gpus * elapsed, 0.02 * 360.0 * gpus * elapsed);
    EXPECT_EQ(std::stod(run[8]), 8.0 * gpus);  // every rank appended its count to $JOULE_REPORT_FILE
  }
  EXPECT_EQ(read_lines(tmp.file("runs.csv"))[0].substr(read_lines(tmp.file("runs.csv"))[0].rfind(',')), ",nodes");
  EXPECT_EQ(read_lines(tmp.file("runs.nodes.csv")).size(), 1u + 2 + 2 + 4);  // header, then a row per node of each run

  // joule analyze: per GPU count its nodes, time, energy, energy per GPU-hour; the fitted exponents.
  const auto json = run_process({JOULE_BINARY, "analyze", store, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["scaling"].size(), 1u);
  const auto& scaling = j["scaling"][0];
  ASSERT_EQ(scaling["points"].size(), 3u);
  const int nodes_of[] = {1, 1, 2};
  for (int i = 0; i < 3; ++i) {
    const auto& p = scaling["points"][i];
    EXPECT_EQ(p["gpus"].get<double>(), std::pow(2.0, i));
    EXPECT_EQ(p["nodes"], nodes_of[i]);
    EXPECT_EQ(p["n"], 2);
    EXPECT_NEAR(p["wh_per_gpu_hour"].get<double>(), 360.0, 0.02 * 360.0);  // simulated GPUs at 360 W, no RAPL
    EXPECT_NEAR(p["energy_j_mean"].get<double>(), 360.0 * std::pow(2.0, i) * p["time_s_mean"].get<double>(),
                0.02 * p["energy_j_mean"].get<double>());
  }
  // The same sleep on more GPUs: time flat (b ~ 0), energy linear in the GPUs (c ~ 1).
  EXPECT_NEAR(scaling["b"].get<double>(), 0.0, 0.3);
  EXPECT_NEAR(scaling["energy"]["c"].get<double>(), 1.0, 0.3);
  EXPECT_EQ(scaling["energy"]["n"], 6);
  const auto text = run_process({JOULE_BINARY, "analyze", store});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("energy with GPU count (E = a * N^c"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("per GPU count (energy per GPU-hour = energy / (GPUs x hours)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n  all                           4      2   2 "), std::string::npos) << text.out;

  // joule report: the scaling per GPU count, the chart of energy per GPU-hour, each run's nodes.
  const auto report = run_process({JOULE_BINARY, "report", store, "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = testing::read_file(tmp.file("r.html"));
  EXPECT_NE(html.find("<h3>Scaling, per GPU count</h3>"), std::string::npos);
  EXPECT_NE(html.find("Energy per GPU-hour vs GPU count"), std::string::npos);
  EXPECT_NE(html.find("<h2>Nodes</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>gpus=4</td><td>box-1</td><td data-sort=\"2\">2</td><td>2,3</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>nodes</th>"), std::string::npos);  // a column in the configurations table
  EXPECT_NE(html.find("box-1 gpu0"), std::string::npos);      // a node's GPU in the power timelines
  // Speed-up, energy and energy per GPU-hour vs GPUs, the Pareto front and a power timeline per GPU
  // count (each node's GPUs): drawn, nothing sticking out.
  for (const std::string width : {"390", "1400"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("r.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-plots"), "7") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), "7") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at width " << width << ": " << body;
  }
}
#endif

}  // namespace
}  // namespace joule
