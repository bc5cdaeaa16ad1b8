#!/usr/bin/env bash
# Builds the Debian package from a configured build directory, checks it with
# lintian, installs it with dpkg, runs what an operator runs first from the
# installed paths, and purges it, checking nothing is left. Needs root (dpkg).
# Usage: scripts/package-test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=$(cd "${1:-build}" && pwd)

if [[ $(id -u) -ne 0 ]]; then
  echo "package-test.sh: run as root (it installs and purges the package)" >&2
  exit 1
fi
if dpkg-query -W -f='${Status}' joule 2>/dev/null | grep -q "install ok installed"; then
  echo "package-test.sh: a joule package is installed already; remove it first (dpkg --purge joule)" >&2
  exit 1
fi

step() { echo "package-test.sh: $*"; }
fail() { echo "package-test.sh: $*" >&2; exit 1; }

# joule-NAME.service: installed, starting the installed `joule NAME`, enabled
# by no one (the operator enables it), and valid to systemd where
# systemd-analyze exists (its verify exits 0 on unknown keys and bad values,
# so any message fails the check).
check_joule_unit() {
  local name=$1 unit=/lib/systemd/system/joule-$1.service
  [[ -f $unit ]] || fail "$unit is not in the package"
  grep -q "^ExecStart=/usr/bin/joule $name " "$unit" || fail "$unit does not start /usr/bin/joule $name"
  [[ ! -e /etc/systemd/system/multi-user.target.wants/joule-$name.service ]] || fail "the package enabled $unit"
  if command -v systemd-analyze >/dev/null; then
    local found
    found=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify $unit: ${found:-failed}"
    [[ -z $found ]] || fail "systemd-analyze verify $unit: $found"
    step "joule-$name.service: installed, not enabled, systemd-analyze verify clean"
  else
    step "joule-$name.service: installed, not enabled (no systemd-analyze here: not verified)"
  fi
}

(cd "$build_dir" && rm -f joule_*.deb && cpack -G DEB >cpack.log 2>&1) || { cat "$build_dir/cpack.log" >&2; exit 1; }
deb=$(ls "$build_dir"/joule_*.deb)
step "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# Lintian runs as root here (CI); errors and warnings both fail.
lintian --fail-on error,warning --tag-display-limit 0 "$deb" 2>&1 | grep -v "running with root privileges" || true
lintian --fail-on error,warning "$deb" >/dev/null 2>&1 || { echo "package-test.sh: lintian found problems (above)" >&2; exit 1; }
step "lintian: clean"

dpkg -i "$deb" >/dev/null
trap 'dpkg --purge joule >/dev/null 2>&1 || true' EXIT
getent group joule >/dev/null || { echo "package-test.sh: postinst made no joule group" >&2; exit 1; }
[[ -d /var/lib/joule ]] || { echo "package-test.sh: postinst made no /var/lib/joule" >&2; exit 1; }

# What an operator runs first, from the installed paths only (no build tree).
cd /
env -i PATH=/usr/bin:/usr/sbin:/bin:/sbin JOULE_NVML_LIBRARY=/nonexistent /usr/bin/joule info >/dev/null
/usr/sbin/jouled --check-config --config /etc/joule/jouled.conf
env -i PATH=/usr/bin:/bin /usr/bin/joule simulate --workload cifar100 --seeds 1..2 2>/dev/null | grep -q "cifar100 .* zeus"
env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "import joule, sys; sys.exit(0 if joule.__file__.startswith('/usr/lib/python3/dist-packages/') else 1)"
env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "import joule.service; joule.BatchSizeClient('http://127.0.0.1:8321')"
[[ -f /usr/share/man/man1/joule.1.gz && -f /usr/share/man/man8/jouled.8.gz && -f /usr/share/bash-completion/completions/joule ]]
grep -q "^ExecStart=/usr/sbin/jouled " /lib/systemd/system/jouled.service
step "installed: joule info, jouled --check-config, joule simulate (bundled traces), import joule (and joule.service), man pages, bash completion, unit"
check_joule_unit serve
check_joule_unit exporter
[[ -f /usr/share/joule/grafana/joule-dashboard.json ]] || fail "the Grafana dashboard is not in the package"
[[ -f /usr/share/joule/carbon/grid-intensity.csv && -f /usr/share/joule/carbon/README.md ]] ||
  fail "the carbon-intensity table or its README is not in the package"
env -i PATH=/usr/bin:/bin JOULE_NVML_LIBRARY=/nonexistent /usr/bin/joule measure --carbon-region FRA -- true 2>&1 |
  grep -q "^joule: carbon: .* FRA (France)" || fail "the installed joule measure --carbon-region FRA gave no carbon line"

dpkg --purge joule >/dev/null
trap - EXIT
for path in /usr/bin/joule /usr/sbin/jouled /etc/joule /var/lib/joule /usr/share/joule /usr/lib/python3/dist-packages/joule \
            /lib/systemd/system/jouled.service /lib/systemd/system/joule-serve.service \
            /lib/systemd/system/joule-exporter.service /usr/lib/joule \
            /usr/share/bash-completion/completions/joule; do
  if [[ -e $path ]]; then
    echo "package-test.sh: $path is left after purge" >&2
    exit 1
  fi
done
step "purged: nothing left"

# The same on a fresh Debian bookworm (debootstrap, minimal): apt resolves the
# package's dependencies from Debian's repository. JOULE_PACKAGE_FRESH=0 skips
# it (it downloads ~100 MB and takes a few minutes).
if [[ ${JOULE_PACKAGE_FRESH:-1} == 1 ]]; then
  fresh=$(mktemp -d /tmp/joule-fresh.XXXXXX)
  cleanup_fresh() {
    umount "$fresh/proc" 2>/dev/null || true
    rm -rf --one-file-system "$fresh"
  }
  trap cleanup_fresh EXIT
  mirror=${JOULE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  debootstrap --variant=minbase bookworm "$fresh" "$mirror" >"$build_dir/debootstrap.log" 2>&1 ||
    { tail -20 "$build_dir/debootstrap.log" >&2; echo "package-test.sh: debootstrap failed" >&2; exit 1; }
  cp "$deb" "$fresh/tmp/joule.deb"
  cp /etc/resolv.conf "$fresh/etc/resolv.conf"
  mount -t proc proc "$fresh/proc"
  in_fresh() { chroot "$fresh" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
  in_fresh sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends /tmp/joule.deb' \
    >"$build_dir/fresh-install.log" 2>&1 ||
    { tail -20 "$build_dir/fresh-install.log" >&2; echo "package-test.sh: install on a fresh bookworm failed" >&2; exit 1; }
  in_fresh joule info >/dev/null
  in_fresh jouled --check-config --config /etc/joule/jouled.conf >/dev/null
  in_fresh sh -c 'joule simulate --workload cifar100 --seeds 1..2 2>/dev/null' | grep -q "cifar100 .* zeus"
  in_fresh python3 -c "import joule"
  in_fresh dpkg --purge joule >/dev/null
  for path in /usr/bin/joule /etc/joule /var/lib/joule /usr/share/joule; do
    [[ -e $fresh$path ]] && { echo "package-test.sh: $path is left after purge on the fresh system" >&2; exit 1; }
  done
  cleanup_fresh
  trap - EXIT
  step "fresh bookworm: installed with its dependencies by apt, used, purged"
fi
