#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# What the recurring-job runs on a GPU machine need beyond the wheel
# (bench/gpu_recurring_live.py, docs/optimizer.md "A recurring job on a real
# GPU"), packed small enough to travel beside it and the source tree
# (run(carry=...) takes 64 MiB in all):
#   CARRY_DIR/serve.tar.xz   this build's joule, which has `joule serve` (the
#                            wheel leaves the service out), stripped, with its
#                            shared libraries (all but libc, libm, libstdc++, libgcc_s)
#   CARRY_DIR/fmnist-xz/     Fashion-MNIST's four idx files, xz-compressed
#                            (26 MB where Debian's gzip files take 31 MB)
# Usage: bench/carry_recurring.sh CARRY_DIR [BUILD_DIR]   (CARRY_DIR git-ignored, e.g. .device-carry)
# There: bash bench/gpu_recurring_setup.sh CARRY_DIR      (unpacks into /tmp/serve and /tmp/fm)
set -euo pipefail
carry=$1
build=${2:-build}
data=/usr/share/datasets/fashion-mnist
mkdir -p "$carry/fmnist-xz"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/lib"
cp "$build/bin/joule" "$staging/bin/"
strip --strip-debug "$staging/bin/joule"
source "$(dirname "$0")/lib/shared_libs.sh"
copy_shared_libs "$staging/lib" "$staging/bin/joule"
tar -cJf "$carry/serve.tar.xz" -C "$staging" bin lib
for f in "$data"/*-ubyte.gz; do
  out="$carry/fmnist-xz/$(basename "$f").xz"
  [[ -s $out ]] || zcat "$f" | xz -9e >"$out"
done
du -sh "$carry/serve.tar.xz" "$carry/fmnist-xz"
