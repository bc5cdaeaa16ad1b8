#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# joule's pip artifacts where a user's GPU machine is: a minimal Debian
# bookworm (scripts/lib/minimal-root.sh) with only a C++ compiler, CMake,
# Python and its headers, and no network while pip runs.
#   1. `pip install` of the sdist (scripts/build-dist.sh) into a fresh venv:
#      the build-on-install, offline, with nothing but what the sdist
#      carries; the program and the module of that venv run. The wheel pip
#      built on the way (kept in its cache) is tagged by the glibc its files
#      need (scripts/wheel-platform-tag.py), which must be <= 2.34 (RHEL 9,
#      Ubuntu 22.04: docs/install.md), and its programs may link only libc,
#      libm, libstdc++, libgcc_s and the dynamic loader.
#   2. That wheel installs into another fresh venv (the prebuilt install,
#      without compiling twice); there `joule info`, `joule measure` (exit
#      status passed through, carbon from the table it carries), `joule
#      simulate` on the bundled traces, `joule serve`'s answer and a Python
#      window on simulated GPUs must work.
#   3. An sdist without one library it carries (SQLite) must fail to build,
#      naming it: this test sees a library missing from the sdist.
# Usage: scripts/dist-test.sh DIST_DIR  (holding joule-X.tar.gz). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$(cd "${1:?usage: scripts/dist-test.sh DIST_DIR}" && pwd)
sdists=("$dist"/joule-*.tar.gz)
[[ -f ${sdists[0]} ]] || { echo "dist-test.sh: no joule-*.tar.gz in $dist (scripts/build-dist.sh makes it)" >&2; exit 1; }
sdist=${sdists[0]}
source scripts/lib/minimal-root.sh
step() { echo "dist-test.sh: $*"; }
fail() { echo "dist-test.sh: $*" >&2; exit 1; }

root=$(mktemp -d /tmp/joule-dist-root.XXXXXX)
trap 'minimal_root_remove "$root"' EXIT
started=$SECONDS
minimal_root_make "$root" "$dist/minimal-root.log" g++ cmake make python3-dev python3-venv
step "a minimal bookworm with g++, cmake, make, python3-dev, python3-venv ($((SECONDS - started)) s)"
mkdir -p "$root/tmp/dist"
cp "$sdist" "$root/tmp/dist/"
offline() { minimal_root_offline "$root" "$@"; }

# 1. The sdist installed as a user installs it, offline: `pip install
# joule-X.tar.gz` into a fresh venv builds a wheel from it and installs that;
# pip keeps the wheel it built in its cache, which becomes the wheel of step 2.
started=$SECONDS
offline sh -c 'python3 -m venv /opt/sdist && PIP_CACHE_DIR=/tmp/pip-cache /opt/sdist/bin/pip install --no-index /tmp/dist/*.tar.gz' \
  >"$dist/sdist-install.log" 2>&1 || { tail -40 "$dist/sdist-install.log" >&2; fail "pip install of the sdist failed"; }
build_s=$((SECONDS - started))
out=$(offline sh -c 'cd /tmp && /opt/sdist/bin/joule --version && /opt/sdist/bin/python -c "import joule; print(joule.__file__)"') ||
  fail "the sdist's install does not run: $out"
grep -q "^/opt/sdist/" <<<"$(tail -1 <<<"$out")" || fail "the sdist's venv imports joule from elsewhere: $out"
built=$(find "$root/tmp/pip-cache" -name 'joule-*.whl' | head -1)
[[ -n $built ]] || fail "pip kept no wheel of the sdist in its cache ($root/tmp/pip-cache)"
wheel=$(/usr/bin/python3 scripts/wheel-platform-tag.py "$built" 2>"$dist/wheel-tag.log" | tail -1)
mv -f "$wheel" "$dist/"
wheel=$dist/$(basename "$wheel")
report=$(/usr/bin/python3 scripts/wheel-platform-tag.py --report-only "$wheel" 2>/dev/null)
glibc=$(/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["glibc"])' <<<"$report")
/usr/bin/python3 -c 'import sys; v = tuple(map(int, sys.argv[1].split("."))); sys.exit(v > (2, 34))' "$glibc" ||
  fail "the wheel needs glibc $glibc; the promise is 2.34 (RHEL 9): which symbol? $dist/wheel-tag.log"
step "the sdist installed offline in $build_s s ($(tail -1 <<<"$out")); its wheel $(basename "$wheel"), glibc $glibc"

# 2. The wheel in a fresh venv (system site packages: none worth seeing here).
cp "$wheel" "$root/tmp/dist/"
started=$SECONDS
offline sh -c "python3 -m venv /opt/user && /opt/user/bin/pip install --no-index /tmp/dist/$(basename "$wheel")" \
  >"$dist/wheel-install.log" 2>&1 || { tail -20 "$dist/wheel-install.log" >&2; fail "installing the wheel failed"; }
step "the wheel installed in $((SECONDS - started)) s"
package=$(echo "$root"/opt/user/lib/python3*/site-packages/joule)
while IFS= read -r -d '' file; do
  head -c 4 "$file" | grep -q $'\x7fELF' || continue
  needed=$(readelf -d "$file" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
  for lib in $needed; do
    case $lib in
      libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1 | ld-linux-x86-64.so.2 | libdl.so.2 | libpthread.so.0) ;;
      *) fail "${file#"$root"} needs $lib: the wheel may link nothing beyond libc, libm, libstdc++, libgcc_s" ;;
    esac
  done
done < <(find "$package" -type f -print0)
step "its programs link only libc, libm, libstdc++, libgcc_s"
user() { offline sh -c "PATH=/opt/user/bin:\$PATH; cd /tmp; $1"; }
user 'joule info' >"$dist/joule-info.txt" 2>&1 || { cat "$dist/joule-info.txt" >&2; fail "joule info failed"; }
grep -q "SIMULATED" "$dist/joule-info.txt" || fail "joule info does not say the GPUs are simulated"
out=$(user 'joule measure --carbon-region DE -- true 2>&1') || fail "joule measure -- true failed: $out"
grep -q "g CO2e" <<<"$out" || fail "joule measure --carbon-region DE printed no CO2e: $out"
status=0
user 'joule measure -- sh -c "exit 7"' >/dev/null 2>&1 || status=$?
[[ $status == 7 ]] || fail "joule measure passed exit status $status, not 7"
user 'joule simulate --workload cifar100 --seeds 1..2 2>/dev/null' | grep -q "cifar100 .* zeus" ||
  fail "joule simulate did not find its bundled traces"
out=$(user 'joule serve 2>&1') && fail "joule serve ran in a build without the service"
grep -q "is not in this build" <<<"$out" || fail "joule serve did not say what is missing: $out"
out=$(user 'python3 -c "
import time, joule
monitor = joule.Monitor()
with monitor.window(\"w\") as w:
    time.sleep(0.3)
energy = w.measurement.total_energy_j
assert energy > 0, energy
print(len(joule.devices()[\"gpus\"]), \"GPUs,\", round(energy, 1), \"J in\", round(w.measurement.elapsed_s, 2), \"s\")
" 2>>/tmp/python-window.log') || fail "a Python window failed: $out $(cat "$root/tmp/python-window.log")"
step "joule info, measure (carbon, exit status), simulate, serve's answer and a Python window ($out) work"

# 3. A library missing from the sdist is seen.
broken=$(mktemp -d)
tar xzf "$sdist" -C "$broken"
rm -r "$broken"/joule-*/third_party/sqlite3
tar czf "$root/tmp/dist/broken.tar.gz" -C "$broken" "$(basename "$sdist" .tar.gz)"
rm -rf "$broken"
if offline sh -c 'python3 -m venv /opt/broken && /opt/broken/bin/pip install --no-index /tmp/dist/broken.tar.gz' \
     >"$dist/broken-build.log" 2>&1; then
  fail "an sdist without SQLite built: the test would not see a missing library"
fi
grep -q "joule needs SQLite 3" "$dist/broken-build.log" || fail "the failed build does not name SQLite ($dist/broken-build.log)"
step "an sdist without SQLite fails to build, naming it"
