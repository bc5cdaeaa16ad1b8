#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Builds joule's Python module for the Python of a machine that lacks the
# project's build dependencies (the GPU machines): compiles only the binding
# against a libjoule.a built elsewhere, with pybind11 from the installed
# PyTorch. Usage: bench/build_python_module_on_device.sh CARRY_DIR OUT_PACKAGE_DIR [SOURCE_DIR]
#   CARRY_DIR holds lib/libjoule.a, lib/libfmt.so.9 and include/{fmt,nlohmann}.
#   SOURCE_DIR (default: this checkout) holds the include/, src/python/ and
#   python/joule/ that libjoule.a was built from (e.g. an older version's, to
#   measure before and after a change in one run).
set -euo pipefail
carry=$(cd "$1" && pwd)
out=$2
src=${3:-.}
mkdir -p "$out"
python_include=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
torch_include=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")
suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -DFMT_SHARED "$src"/src/python/*.cc \
  -I"$src/include" -I"$carry/include" -I"$python_include" -I"$torch_include" \
  "$carry/lib/libjoule.a" "$carry/lib/libfmt.so.9" -ldl -pthread -Wl,-rpath,"$carry/lib" \
  -o "$out/_joule$suffix"
cp "$src"/python/joule/*.py "$out/"
echo "built $out/_joule$suffix"
