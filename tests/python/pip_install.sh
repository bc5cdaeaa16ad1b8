#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# `pip install .` into a fresh virtual environment (system site packages for
# Debian's torch; no build isolation, no downloads), then import the module.
set -euo pipefail
source_dir=$1
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps --no-index "$source_dir"
cd "$venv"  # not the source tree: import the installed package
"$venv/bin/python" -c "
import joule, joule.torch, joule.service
assert joule.__file__.startswith('$venv'), joule.__file__
print('installed joule at', joule.__file__)
print(joule.devices(backend='sim', sim='count=1')['gpus'][0]['name'])
import joule._carbon
table = joule._carbon.packaged_table()
assert table and table.startswith('$venv'), table  # the carbon table installed inside the package
print('carbon table', table, joule.Carbon(region='FR').footprint(3.6e6)['co2e_g'], 'g/kWh in France')
"
