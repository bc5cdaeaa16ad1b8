# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""examples/hf_trainer, examples/lightning, examples/accelerate where their framework is not installed
(CI: Debian has PyTorch but no transformers, Lightning or Accelerate): --help still works, and a run
exits at once with one line naming the missing package and how to install it. Where the framework is
installed, the run itself is bench/gpu_frameworks.sh's business (on a GPU) and these tests skip.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = [("hf_trainer", "transformers"), ("lightning", "lightning"), ("accelerate", "accelerate")]


def run_example(name, *args, cwd):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", name, "train.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("name,package", EXAMPLES)
def test_help_works_without_the_framework(name, package, tmp_path):
    r = run_example(name, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for flag in ("--steps", "--seconds", "--out-dir", "--no-joule", "--carbon-region"):
        assert flag in r.stdout


@pytest.mark.parametrize("name,package", EXAMPLES)
def test_missing_framework_is_named_with_how_to_install_it(name, package, tmp_path):
    if any(importlib.util.find_spec(m) is not None for m in (package, "pytorch_" + package if package == "lightning" else package)):
        pytest.skip(f"{package} is installed here")
    r = run_example(name, "--steps", "1", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr  # one clear line, no traceback
    assert lines[0].startswith(f"examples/{name}/train.py: missing ")
    assert f"{package} (python3 -m pip install " in lines[0]
    assert not (tmp_path / "out").exists()  # nothing done before the check
