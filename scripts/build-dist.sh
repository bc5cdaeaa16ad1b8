#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Makes joule's artifacts for pip (docs/install.md), here on Debian:
#   OUT/joule-X.tar.gz   the sdist: the sources a build needs and third_party/
#                        (scripts/collect-third-party.sh, from Debian's packages
#                        with their licences), so `pip install` builds it offline
#                        with only a C++20 compiler, CMake and Python headers;
#   OUT/joule-X-cpXY-cpXY-manylinux_2_N_x86_64.whl, one per Python given: built
#                        from that sdist (which proves it whole), linking nothing
#                        but libc, libm and libstdc++ (no optional module), tagged
#                        by the highest glibc symbol version its files need
#                        (scripts/wheel-platform-tag.py). libstdc++ stays shared:
#                        linked in, its libgcc unwinder and random_device would
#                        need glibc 2.35 and 2.36 (_dl_find_object, arc4random).
# Usage: scripts/build-dist.sh [--out DIR] [--sdist-only] [--python PYTHON]...
#   (default: dist/ and Debian's /usr/bin/python3; JOULE_JOBS: parallel compiles)
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
pythons=()
sdist_only=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --python) pythons+=("$2"); shift 2 ;;
    --sdist-only) sdist_only=1; shift ;;
    *) echo "build-dist.sh: unknown argument '$1' (usage: scripts/build-dist.sh [--out DIR] [--sdist-only] [--python PYTHON]...)" >&2
       exit 2 ;;
  esac
done
((${#pythons[@]})) || pythons=(/usr/bin/python3)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "build-dist.sh: $*"; }

scripts/collect-third-party.sh "$work/third_party" >/dev/null
sdist=$(JOULE_THIRD_PARTY_DIR=$work/third_party /usr/bin/python3 -c \
  'import sys; sys.path.insert(0, "packaging/pip"); import joule_build; print(joule_build.build_sdist(sys.argv[1]))' "$out")
step "$out/$sdist ($(du -h "$out/$sdist" | cut -f1))"
((sdist_only)) && exit 0

# The prebuilt wheel leaves the optional modules out: they would link the
# system's Boost, libpqxx, OpenSSL, MPI.
self_contained="-DJOULE_WITH_SERVICE=OFF -DJOULE_WITH_EXPORTER=OFF -DJOULE_WITH_MPI=OFF -DJOULE_WITH_KUBELET=OFF"
for python in "${pythons[@]}"; do
  started=$SECONDS
  rm -rf "$work/wheel"
  JOULE_CMAKE_ARGS=$self_contained "$python" -m pip wheel --quiet --no-deps --no-index -w "$work/wheel" \
    "$out/$sdist" >"$work/wheel.log" 2>&1 ||
    { tail -30 "$work/wheel.log" >&2; echo "build-dist.sh: building the wheel with $python failed" >&2; exit 1; }
  built=("$work"/wheel/*.whl)
  wheel=$(/usr/bin/python3 scripts/wheel-platform-tag.py "${built[0]}" 2>/dev/null | tail -1)
  mv -f "$wheel" "$out/"
  step "$out/$(basename "$wheel") ($(du -h "$out/$(basename "$wheel")" | cut -f1), $((SECONDS - started)) s with $python)"
done
