#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: unpacks what bench/carry_recurring.sh packed.
#   /tmp/serve/joule   runs the carried joule (joule serve) with its libraries
#   /tmp/fm/           Fashion-MNIST's idx files, gzip-compressed as train.py reads them
# Usage: bash bench/gpu_recurring_setup.sh CARRY_DIR
set -euo pipefail
carry=$1
mkdir -p /tmp/serve /tmp/fm
tar -xJf "$carry/serve.tar.xz" -C /tmp/serve
printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/serve/lib exec /tmp/serve/bin/joule "$@"\n' >/tmp/serve/joule
chmod +x /tmp/serve/joule
for f in "$carry"/fmnist-xz/*.xz; do
  xz -dc "$f" | gzip -1 >"/tmp/fm/$(basename "$f" .xz)"
done
echo "gpu_recurring_setup.sh: $(/tmp/serve/joule --version) in /tmp/serve, $(ls /tmp/fm | wc -l) data files in /tmp/fm"
