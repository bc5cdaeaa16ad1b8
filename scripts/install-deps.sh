#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Installs everything joule needs to build and test, from Debian bookworm's
# package repository only. Idempotent: safe to run again on a ready machine.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps.sh: run as root (it calls apt-get)" >&2
  exit 1
fi

packages=(
  # toolchain and build (ccache: scripts/test.sh reuses earlier compiles)
  build-essential cmake pkg-config git ccache
  # libraries joule links
  libfmt-dev libcli11-dev nlohmann-json3-dev libsqlite3-dev libtomlplusplus-dev libpcg-cpp-dev
  # the least-squares fits of energy attribution
  libeigen3-dev
  # joule serve: HTTP server (Boost.Beast) and client (cpp-httplib); the
  # PostgreSQL job store (the server itself for its tests)
  libboost-dev libcpp-httplib-dev libssl-dev openssl libpqxx-dev postgresql
  # tests and benchmarks; clang's libFuzzer for the daemon's and the service's fuzzers
  libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev
  # the Python module and its tests (Debian's python3, pybind11, PyTorch for CPU)
  python3 python3-dev pybind11-dev python3-torch python3-pytest python3-numpy
  # joule.torch builds its C++ DDP comm hook against PyTorch at first use (torch.utils.cpp_extension: ninja)
  ninja-build
  python3-pip python3-setuptools python3-venv
  # the recurring example (examples/recurring) trains on Fashion-MNIST, from its idx files
  dataset-fashion-mnist
  # LibTorch for examples/libtorch; Chromium renders `joule report` output in the tests
  libtorch-dev chromium
  # the Debian package and its check (man-db and groff render the man pages
  # in scripts/check-man-page.sh)
  lintian debootstrap man-db groff-base
  # `joule top` is tested by driving it in a terminal multiplexer; curl sends
  # the service requests its own client never would
  tmux curl
  # a real Prometheus scrapes `joule exporter` in its CI test
  prometheus
  # joule measure --mpi, tested with several ranks of a real mpirun
  openmpi-bin libopenmpi-dev
  # ROCm SMI's header (rocm_smi/rocm_smi.h, 5.2): the fake librocm_smi64 in
  # tests/fake_rocm_smi is compiled against it, so its ABI is the real one's
  librocm-smi-dev
  # a real single-machine Slurm (slurmctld, slurmd, srun) and its munge, started by the tests as root;
  # slurmdbd over its own MariaDB, so that sacct shows what joule slurm-epilog stores
  slurm-wlm munge slurmdbd mariadb-server
  # joule exporter --kubelet-socket: the kubelet's PodResources API over gRPC (protoc generates
  # its client, and the tests' fake kubelet)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # tests/packaging reads the Kubernetes manifests (packaging/kubernetes)
  python3-yaml
  # scripts/collect-third-party.sh builds the SQLite amalgamation for the sdist
  # from Debian's source package: dpkg-source unpacks it, tclsh makes sqlite3.c
  dpkg-dev tcl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps.sh: all ${#packages[@]} packages present"
