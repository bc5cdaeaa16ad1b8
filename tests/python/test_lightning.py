# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Runs lightning_check.py when PyTorch Lightning is installed (not a Debian package)."""
import os
import subprocess
import sys

import pytest


def test_lightning_callback_drives_the_optimizer():
    try:
        import lightning  # noqa: F401
    except ImportError:
        pytest.importorskip("pytorch_lightning")
    script = os.path.join(os.path.dirname(__file__), "lightning_check.py")
    result = subprocess.run([sys.executable, script], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lightning callback OK" in result.stdout
