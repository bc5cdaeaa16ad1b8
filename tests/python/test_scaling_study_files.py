# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The scaling study's files (issue 36, bench/scaling/): the checked-in sweep files are the full
variant that bench/scaling/variants.py writes, each is a sweep joule accepts with the runs the
issue asks for, the other variants change only what they say, and the GPT's strong-scaling sweep
runs end to end on the CPU (two Gloo ranks, simulated GPUs) through run_scaling.sh: sweep,
analyze, report. The results kept from the GPU machines hold the runs the docs say.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import joule_binary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "docs", "examples", "scaling")
VARIANTS = os.path.join(ROOT, "bench", "scaling", "variants.py")
SWEEPS = ["resnet50_weak", "resnet50_strong", "gpt_weak", "gpt_strong"]
RUN_SCALING = os.path.join(ROOT, "bench", "scaling", "run_scaling.sh")
with open(os.path.join(ROOT, "docs", "characterisation.md")) as f:
    CHARACTERISATION = f.read()


def write_variant(out, variant, gpus):
    subprocess.run([sys.executable, VARIANTS, "write", "--variant", variant, "--gpus", gpus, "--out", str(out)],
                   check=True, capture_output=True, text=True)
    return {name: (out / f"{name}.toml").read_text() for name in SWEEPS}


def dry_run(path, store, gpus=8):
    result = subprocess.run([joule_binary(), "sweep", str(path), "--dry-run", "--no-control", "--backend", "sim",
                             "--sim", f"count={gpus}", "--store", str(store)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if " repeat " in line]


def test_checked_in_files_are_the_full_variant(tmp_path):
    written = write_variant(tmp_path, "full", "1,2,4,8")
    for name in SWEEPS:
        with open(os.path.join(EXAMPLES, f"{name}.toml")) as f:
            assert f.read() == written[name], name


def test_each_sweep_is_the_issues_grid(tmp_path):
    for name in SWEEPS:
        runs = dry_run(os.path.join(EXAMPLES, f"{name}.toml"), tmp_path / f"{name}.sqlite")
        assert len(runs) == 2 * 4 * 3, name  # two batch values x GPUs 1, 2, 4, 8 x 3 repeats
        configs = [json.loads(line.split(" repeat ")[0]) for line in runs]
        assert sorted({c["gpus"] for c in configs}, key=int) == ["1", "2", "4", "8"]
        key = "global_batch" if name.endswith("strong") else "batch_size"
        assert len({c[key] for c in configs}) == 2
        # The strong sweeps' global batches split evenly over every GPU count.
        if key == "global_batch":
            assert all(int(c[key]) % int(c["gpus"]) == 0 for c in configs)
        flag = "--global-batch" if key == "global_batch" else "--batch-size"
        assert all(f"{flag} {c[key]} " in line and f"--nproc-per-node {c['gpus']} " in line
                   for c, line in zip(configs, runs))


def test_variants_change_only_repeats_gpus_and_steps(tmp_path):
    full = write_variant(tmp_path / "full", "full", "1,2,4,8")
    reduced = write_variant(tmp_path / "reduced", "reduced", "1,2,4")
    for name in SWEEPS:
        assert "repeats = 2" in reduced[name] and "gpus = [1, 2, 4]" in reduced[name]
        steps_full = int(re.search(r"--steps (\d+)", full[name]).group(1))
        assert f"--steps {steps_full // 2} " in reduced[name]
        strip = lambda text: re.sub(r"(--steps|--warmup-steps) \d+|^repeats = .*$|^gpus = .*$|^# Written by.*\n", "",
                                    text, flags=re.MULTILINE)
        assert strip(full[name]) == strip(reduced[name])
        runs = dry_run(tmp_path / "reduced" / f"{name}.toml", tmp_path / f"{name}.sqlite", gpus=4)
        assert len(runs) == 2 * 3 * 2


def test_estimate_prints_every_sweep_and_a_total():
    result = subprocess.run([sys.executable, VARIANTS, "estimate", "--variant", "full"], capture_output=True,
                            text=True, check=True)
    for name in SWEEPS + ["total"]:
        assert re.search(rf"^  {name} +\d+ runs  ~ *\d+\.\d min", result.stdout, re.MULTILINE), result.stdout
    assert " 96 runs" in result.stdout


def carry_with_joule(tmp_path):
    """A carry folder (DIR/bin/joule, DIR/lib) holding the binary under test: where run_scaling.sh
    takes joule from."""
    carry = tmp_path / "carry"
    (carry / "bin").mkdir(parents=True)
    (carry / "lib").mkdir()
    os.symlink(joule_binary(), carry / "bin" / "joule")
    return carry


def torch_python():
    probe = subprocess.run([sys.executable, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                           capture_output=True)
    return sys.executable if probe.returncode == 0 else None


@pytest.mark.skipif(torch_python() is None, reason="no torch with Gloo in this Python")
@pytest.mark.skipif(shutil.which("timeout") is None, reason="no timeout(1)")
def test_gpt_strong_runs_end_to_end_on_the_cpu(tmp_path):
    # The commands say python3 and torchrun: this Python and the CPU stand-in, first on PATH.
    shim = tmp_path / "bin"
    shim.mkdir()
    os.symlink(sys.executable, shim / "python3")
    shutil.copy(os.path.join(ROOT, "bench", "scaling", "cpu_proof", "torchrun"), shim / "torchrun")
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    carry = carry_with_joule(tmp_path)
    result = subprocess.run(["bash", RUN_SCALING, "--variant", "cpu",
                             "--gpus", "1,2", "--only", "gpt_strong", "--carry", str(carry), "--deadline-s", "240",
                             "--reserve-s", "30", str(out), "--", "--backend", "sim", "--sim", "count=2"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    analysis = json.loads((out / "gpt_strong_analysis.json").read_text())
    assert analysis["counts"]["ok"] == 4 and analysis["counts"]["runs"] == 4
    text = (out / "gpt_strong_analysis.txt").read_text()
    assert "4 configurations; 4 runs: 4 ok" in text
    assert "scaling with GPU count" in text and "energy per GPU-hour" in text
    assert (out / "gpt_strong_report.html").stat().st_size > 10_000
    # Every run reported its samples: the global batch x steps, whatever the rank count.
    with open(out / "gpt_strong_runs.csv", newline="") as f:
        samples = [float(row["samples"]) for row in csv.DictReader(f)]
    assert sorted(samples) == [8.0, 8.0, 16.0, 16.0]
    summary = (out / "summary.md").read_text()
    assert "## gpt_strong: done" in summary
    assert (out / "gpu_model.txt").read_text().strip()  # this machine's model, or "none (no nvidia-smi)"
    environment = (out / "environment.txt").read_text()
    assert environment.startswith("== ") and environment.count("\n== ") == 0  # one command, one block
    # Energy per sample per configuration: 2 steps x the global batch, on 1 and 2 simulated GPUs.
    per_sample = (out / "gpt_strong_per_sample.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in per_sample[2:]] == [
        "| global_batch=4 gpus=1", "| global_batch=4 gpus=2", "| global_batch=8 gpus=1", "| global_batch=8 gpus=2"]
    assert [line.split(" | ")[4] for line in per_sample[2:]] == ["8", "8", "16", "16"]
    assert per_sample[2] in summary


@pytest.mark.skipif(torch_python() is None, reason="no torch with Gloo in this Python")
def test_builtin_resnet50_trains_without_torchvision(tmp_path):
    # The GPU machines may have PyTorch without torchvision: ddp_train.py's own ResNet-50.
    report = tmp_path / "counts"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ddp_train.py"), "--model", "resnet50",
                             "--resnet-impl", "builtin", "--device", "cpu", "--image-size", "32", "--batch-size", "2",
                             "--steps", "2", "--warmup-steps", "1"],
                            capture_output=True, text=True, env=dict(os.environ, JOULE_REPORT_FILE=str(report)),
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "(model from builtin)" in result.stdout
    assert report.read_text() == "samples=4 steps=2\n"
    count = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import ddp_train; "
                            "print(sum(p.numel() for p in ddp_train.builtin_resnet50().parameters()))",
                            os.path.join(ROOT, "bench")], capture_output=True, text=True, check=True)
    assert int(count.stdout) == 25_557_032  # torchvision's resnet50(num_classes=1000)


# What docs/characterisation.md says each kept sweep holds: (ok, interrupted) runs.
KEPT_RUNS = {
    "h100x4-2026-11-27": {"resnet50_weak": (18, 0), "resnet50_strong": (18, 0), "gpt_weak": (18, 0),
                          "gpt_strong": (18, 0)},
    "h200x4-2026-11-26": {"resnet50_weak": (18, 0), "resnet50_strong": (18, 0), "gpt_weak": (9, 1)},
}


@pytest.mark.parametrize("folder", sorted(KEPT_RUNS))
def test_kept_gpu_results_are_what_the_docs_say(tmp_path, folder):
    for name, (ok, interrupted) in KEPT_RUNS[folder].items():
        store = os.path.join(EXAMPLES, folder, f"{name}.sqlite")
        result = subprocess.run([joule_binary(), "analyze", store, "--json"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        analysis = json.loads(result.stdout)
        assert (analysis["counts"]["ok"], analysis["counts"]["interrupted"]) == (ok, interrupted), name
        # The kept runs CSV is the store's: the same successful runs per configuration.
        with open(os.path.join(EXAMPLES, folder, f"{name}_runs.csv")) as f:
            ok_rows = [row for row in csv.DictReader(f) if row["status"] == "ok"]
        per_config = {}
        for row in ok_rows:
            key = json.dumps(json.loads(row["config"]), sort_keys=True)
            per_config[key] = per_config.get(key, 0) + 1
        assert sum(per_config.values()) == ok, name
        assert sorted(per_config.values()) == sorted(c["n"] for c in analysis["configs"]), name
        report = tmp_path / f"{name}.html"
        result = subprocess.run([joule_binary(), "report", store, "-o", str(report)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert report.stat().st_size > 10_000
        # Every configuration's mean time and GPU energy are in the docs' table, in its row's GPU
        # count: "| GPUs [(n runs)] | time s | energy J |".
        for config in analysis["configs"]:
            row = r"\| {}( \(\d runs?\))? \| {:.1f} \| {:,.0f} \|".format(
                config["config"]["gpus"], config["time_s_mean"], config["energy_j_mean"])
            assert re.search(row, CHARACTERISATION), (folder, name, config["config"], row)



def test_a_folder_of_another_gpu_model_is_refused_before_anything_runs(tmp_path):
    # The machine answers as 4 H200s (a stand-in nvidia-smi); the folder's runs were on H100s.
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "nvidia-smi").write_text("#!/bin/sh\nfor i in 0 1 2 3; do echo 'NVIDIA H200'; done\n")
    (shim / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu_model.txt").write_text("NVIDIA H100 80GB HBM3\n")
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")
    options = ["--variant", "cpu", "--gpus", "1,2", "--only", "gpt_strong", "--carry", str(carry_with_joule(tmp_path))]
    result = subprocess.run(["bash", RUN_SCALING, *options, str(out)], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "holds runs on NVIDIA H100 80GB HBM3, but this machine has NVIDIA H200" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gpu_model.txt"]  # nothing written, nothing run
    # The same folder on the same model goes on (here as far as the sweep files, then stopped by a
    # deadline too short for any run).
    (out / "gpu_model.txt").write_text("NVIDIA H200\n")
    resume = ["bash", RUN_SCALING, *options, "--deadline-s", "1", "--reserve-s", "0", "--no-preflight", str(out)]
    result = subprocess.run(resume, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert (out / "variant.txt").read_text() == "variant=cpu gpus=1,2\n"
    assert (out / "gpu_model.txt").read_text() == "NVIDIA H200\n"
    # A second command on the folder adds its own block to environment.txt.
    result = subprocess.run(resume, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    blocks = (out / "environment.txt").read_text().split("\n== ")
    assert len(blocks) == 2 and all("NVIDIA H200" in block for block in blocks)
