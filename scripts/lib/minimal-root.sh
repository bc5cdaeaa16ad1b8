# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# A minimal Debian bookworm to install joule into, as a user's machine would
# be: debootstrap's minbase (apt, dpkg, coreutils; no compiler, no Python) and
# only the packages a test names. Sourced by scripts/package-test.sh (the
# Debian package on a fresh system) and scripts/dist-test.sh (the sdist and
# wheel on a machine with only a compiler, CMake and Python). Needs root.
#
#   minimal_root_make DIR LOG [PACKAGE...]   make it in DIR (an empty directory),
#                                            install PACKAGE... with its apt; output in LOG
#   minimal_root_run DIR COMMAND...          run COMMAND inside, clean environment
#   minimal_root_offline DIR COMMAND...      the same with no network at all
#   minimal_root_remove DIR                  unmount and delete it
#
# Downloaded .debs are kept in $JOULE_MINIMAL_ROOT_CACHE (default
# /var/cache/joule-minimal-root), so later runs fetch only what changed;
# JOULE_DEBIAN_MIRROR names the mirror.

minimal_root_cache=${JOULE_MINIMAL_ROOT_CACHE:-/var/cache/joule-minimal-root}

minimal_root_make() {
  local root=$1 log=$2
  shift 2
  local mirror=${JOULE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  mkdir -p "$minimal_root_cache/debootstrap" "$minimal_root_cache/apt/partial"
  debootstrap --variant=minbase --cache-dir="$minimal_root_cache/debootstrap" bookworm "$root" "$mirror" >"$log" 2>&1 ||
    { tail -20 "$log" >&2; echo "minimal-root.sh: debootstrap failed (log: $log)" >&2; return 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  mkdir -p "$root/var/cache/apt/archives"
  mount --bind "$minimal_root_cache/apt" "$root/var/cache/apt/archives"
  if (($#)); then
    minimal_root_run "$root" sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"' sh "$@" \
      >>"$log" 2>&1 ||
      { tail -20 "$log" >&2; echo "minimal-root.sh: installing $* failed (log: $log)" >&2; return 1; }
  fi
}

minimal_root_run() {
  local root=$1
  shift
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

minimal_root_offline() {
  local root=$1
  shift
  unshare --net chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

minimal_root_remove() {
  local root=$1
  [[ -n $root && -d $root ]] || return 0
  umount "$root/var/cache/apt/archives" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
  rm -rf --one-file-system "$root"
}
