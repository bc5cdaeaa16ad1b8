# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Builds the joule Python package with the project's CMake build.

    python3 -m pip install --no-build-isolation .

(no downloads: CMake, pybind11 and the libraries come from Debian packages;
scripts/install-deps.sh installs them)
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self):
        super().__init__("joule._joule", sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        subprocess.check_call([
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
            "-DJOULE_BUILD_TESTS=OFF", "-DJOULE_BUILD_BENCH=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}", f"-DJOULE_PYTHON_PACKAGE_DIR={package_dir}",
        ])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "joule_python",
                               "-j", os.environ.get("JOULE_JOBS", "2")])


setup(
    packages=["joule"],
    package_dir={"": "python"},
    package_data={"joule": ["*.pyi", "py.typed"]},
    ext_modules=[CMakeExtension()],
    cmdclass={"build_ext": CMakeBuild},
)
