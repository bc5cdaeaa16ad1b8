#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian package from a configured build directory, checks it with
# lintian, installs it with dpkg, runs what an operator runs first from the
# installed paths, and purges it, checking nothing is left. Needs root (dpkg).
# Usage: scripts/package-test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$(pwd)
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

version=$(dpkg-deb -f "$deb" Version)
# A joule group made before the package (by hand, as docs/daemon-protocol.md
# shows for a build tree) is the administrator's: purge keeps it.
group_before=0
getent group joule >/dev/null && group_before=1
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
[[ $(/usr/bin/joule --version) == "joule $version" ]] || fail "joule --version does not print 'joule $version'"
[[ $(/usr/sbin/jouled --version) == "jouled $version" ]] || fail "jouled --version does not print 'jouled $version'"
# Man pages: compressed, rendered by man and groff without a warning, each
# section there, joule(1) with a subsection per subcommand.
"$source_dir/scripts/check-man-page.sh" --commands-of /usr/bin/joule /usr/share/man/man1/joule.1.gz ||
  fail "joule(1) fails its checks (above)"
"$source_dir/scripts/check-man-page.sh" /usr/share/man/man8/jouled.8.gz || fail "jouled(8) fails its checks (above)"
step "installed: joule --version, jouled --version, joule(1) and jouled(8) render cleanly with every section"
step "installed: joule info, jouled --check-config, joule simulate (bundled traces), import joule (and joule.service), man pages, bash completion, unit"
check_joule_unit serve
check_joule_unit exporter
# The guides and the examples they link to, the example cluster trace, the
# licences.
doc=/usr/share/doc/joule
for guide in README architecture attribution characterisation cluster daemon-protocol integrations measurement \
             optimizer reliability service simulation telemetry; do
  [[ -f $doc/$guide.md ]] || fail "$doc/$guide.md is not in the package"
done
for example in ddp_sweep.toml ddp_sweep_h200.sqlite ddp_sweep_h200_report.html simulate_drift_v100.html jouled.conf.example; do
  [[ -f $doc/examples/$example ]] || fail "$doc/examples/$example is not in the package"
done
[[ $(head -1 /usr/share/joule/cluster/example_groups.csv 2>/dev/null) == job_id,group,submit_s,duration_s ]] ||
  fail "the example cluster trace is not in the package"
grep -q "^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" $doc/copyright &&
  grep -q "^License: Apache-2.0$" $doc/copyright && grep -q "^License: CC-BY-4.0 and public-domain$" $doc/copyright &&
  [[ -f $doc/NOTICE ]] || fail "$doc/copyright does not state Apache-2.0 and the bundled data's licences, or NOTICE is missing"
step "installed: the guides and their examples, the example cluster trace, copyright (Apache-2.0, CC-BY-4.0, public domain) and NOTICE"
[[ -f /usr/share/joule/grafana/joule-dashboard.json ]] || fail "the Grafana dashboard is not in the package"
[[ -f /usr/share/joule/carbon/grid-intensity.csv && -f /usr/share/joule/carbon/README.md ]] ||
  fail "the carbon-intensity table or its README is not in the package"
env -i PATH=/usr/bin:/bin JOULE_NVML_LIBRARY=/nonexistent /usr/bin/joule measure --carbon-region FRA -- true 2>&1 |
  grep -q "^joule: carbon: .* FRA (France)" || fail "the installed joule measure --carbon-region FRA gave no carbon line"

[[ -x /usr/libexec/joule/slurm-epilog ]] || fail "slurmctld's epilog /usr/libexec/joule/slurm-epilog is not in the package"
epilog_status=0
epilog_said=$(env -i PATH=/usr/bin:/bin /usr/libexec/joule/slurm-epilog 2>&1) || epilog_status=$?
[[ $epilog_status == 2 && $epilog_said == *SLURM_JOB_ID* ]] ||
  fail "the installed slurm-epilog, run with no job, did not say it needs SLURM_JOB_ID (status $epilog_status: $epilog_said)"
step "installed: slurmctld's epilog runs the installed joule slurm-epilog"

dpkg --purge joule >/dev/null
trap - EXIT
for path in /usr/bin/joule /usr/sbin/jouled /etc/joule /var/lib/joule /usr/share/joule /usr/lib/python3/dist-packages/joule \
            /lib/systemd/system/jouled.service /lib/systemd/system/joule-serve.service \
            /lib/systemd/system/joule-exporter.service /usr/lib/joule /usr/libexec/joule \
            /usr/share/bash-completion/completions/joule; do
  if [[ -e $path ]]; then
    echo "package-test.sh: $path is left after purge" >&2
    exit 1
  fi
done
if [[ $group_before == 0 ]]; then
  ! getent group joule >/dev/null || fail "the joule group that installing made is left after purge"
  step "purged: nothing left, the joule group included"
else
  getent group joule >/dev/null || fail "purge removed a joule group that was there before the package"
  step "purged: nothing left (the joule group made before the package is kept)"
fi

# The same on a fresh Debian bookworm (debootstrap, minimal): apt resolves the
# package's dependencies from Debian's repository. JOULE_PACKAGE_FRESH=0 skips
# it (it downloads ~100 MB the first time and takes a few minutes).
if [[ ${JOULE_PACKAGE_FRESH:-1} == 1 ]]; then
  source "$source_dir/scripts/lib/minimal-root.sh"
  fresh=$(mktemp -d /tmp/joule-fresh.XXXXXX)
  trap 'minimal_root_remove "$fresh"' EXIT
  minimal_root_make "$fresh" "$build_dir/debootstrap.log"
  cp "$deb" "$fresh/tmp/joule.deb"
  in_fresh() { minimal_root_run "$fresh" "$@"; }
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
  ! in_fresh getent group joule >/dev/null || fail "the joule group is left after purge on the fresh system"
  minimal_root_remove "$fresh"
  trap - EXIT
  step "fresh bookworm: installed with its dependencies by apt, used, purged"
fi
