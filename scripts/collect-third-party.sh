#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Collects the third-party code joule's core needs into OUT_DIR, for the source
# distribution (sdist): `pip install` then builds joule on a GPU machine that has
# only a compiler, CMake and Python headers. Why here and from Debian: that code
# is never committed to git; it is taken at packaging time from the Debian
# packages joule is built and tested against (scripts/install-deps.sh), so the
# sdist carries exactly those versions, with Debian's copyright files.
#
# Usage: scripts/collect-third-party.sh OUT_DIR
#
# OUT_DIR is made anew (an existing one must be an earlier output of this
# script) with this layout, which the CMake side relies on:
#   fmt/include/fmt/*.h                  libfmt-dev
#   fmt/src/format.cc                    its compiled part, from Debian's source package
#   cli11/include/CLI/**                 libcli11-dev
#   nlohmann_json/include/nlohmann/**    nlohmann-json3-dev
#   tomlplusplus/include/toml++/**       libtomlplusplus-dev
#   pcg/include/pcg_*.hpp                libpcg-cpp-dev
#   eigen3/include/Eigen/**              libeigen3-dev (not unsupported/)
#   rocm_smi/include/rocm_smi/*.h        librocm-smi-dev
#   pybind11/include/pybind11/**         pybind11-dev
#   sqlite3/sqlite3.c, sqlite3/sqlite3.h the SQLite amalgamation
#   <each>/copyright                     the Debian package's copyright file
#   README.md                            packages, versions, licences
# The headers are the files `dpkg -L` lists for each installed package.
#
# No binary package carries the SQLite amalgamation (sqlite3.c): it is built
# from Debian's source package of the installed libsqlite3-dev (same version,
# Debian's patches applied) with upstream's `make sqlite3.c` (needs tclsh).
# The source comes through `apt-get source` with a private apt configuration
# (sources list, lists and cache under a temporary directory; the system's apt
# configuration is left alone) from $JOULE_DEBIAN_MIRROR (default
# http://deb.debian.org/debian) and $JOULE_DEBIAN_SECURITY_MIRROR (default
# http://deb.debian.org/debian-security), checked against
# debian-archive-keyring. The result is cached per Debian version in
# $JOULE_THIRD_PARTY_CACHE/sqlite3/<version>/ (default /var/cache/joule-third-party
# as root, else ~/.cache/joule-third-party), so later runs are fast and offline
# and a new Debian version is fetched and built again.
set -euo pipefail
me=collect-third-party.sh
die() { echo "$me: $*" >&2; exit 1; }

[[ $# -eq 1 && -n $1 && $1 != -* ]] || die "usage: scripts/collect-third-party.sh OUT_DIR"
out=$(realpath -m -- "$1")
[[ $out != / ]] || die "refusing OUT_DIR /"
started_ns=$(date +%s%N)

# name | Debian package | directory the paths are relative to | which of its files (ERE on those paths)
#      | licence stated (SPDX) | what Debian's copyright says for `Files: *` (checked, so a change is seen)
components=(
  "fmt|libfmt-dev|/usr/include|^fmt/[^/]+\\.h\$|MIT|Expat with embedded exception"
  "cli11|libcli11-dev|/usr/include|^CLI/.+|BSD-3-Clause|BSD-3-clause"
  "nlohmann_json|nlohmann-json3-dev|/usr/include|^nlohmann/.+|MIT|Expat"
  "tomlplusplus|libtomlplusplus-dev|/usr/include|^toml\\+\\+/.+|MIT|Expat"
  "pcg|libpcg-cpp-dev|/usr/include|^pcg_[^/]+\\.hpp\$|Apache-2.0|Apache"
  "eigen3|libeigen3-dev|/usr/include/eigen3|^Eigen/.+|MPL-2.0 (a few files BSD-3-Clause)|MPL-2"
  "rocm_smi|librocm-smi-dev|/usr/include|^rocm_smi/[^/]+\\.h\$|NCSA (kfd_ioctl.h: MIT)|NCSA"
  "pybind11|pybind11-dev|/usr/include|^pybind11/.+|BSD-3-Clause|BSD-3-Clause+CLA"
)
sqlite_licence="public domain (blessing)"
sqlite_debian_licence="public-domain"

installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }
version_of() { dpkg-query -W -f='${Version}' "$1"; }

missing=()
for c in "${components[@]}" "sqlite3|libsqlite3-dev"; do
  IFS='|' read -r _ pkg _ <<<"$c"
  installed "$pkg" || missing+=("$pkg")
done
((${#missing[@]} == 0)) ||
  die "not installed: ${missing[*]}; install them with: apt-get install ${missing[*]} (or scripts/install-deps.sh)"

# The licence Debian's machine-readable copyright file gives for `Files: *`.
debian_licence() {
  awk '/^Files:[[:space:]]*\*[[:space:]]*$/ { f = 1; next }
       f && /^License:/ { sub(/^License:[[:space:]]*/, ""); sub(/[[:space:]]+$/, ""); print; exit }
       /^[[:space:]]*$/ { f = 0 }' "$1"
}
check_copyright() {  # FILE PACKAGE EXPECTED
  [[ -f $1 ]] || die "$2: no copyright file at $1 (excluded by a dpkg path-exclude? reinstall $2 without it)"
  local got
  got=$(debian_licence "$1")
  [[ $got == "$3" ]] ||
    die "$2: $1 gives licence '$got' for Files: *, this script expects '$3': check the licence and update the table in $0"
}

# Refuse to delete a directory this script did not make.
if [[ -e $out ]]; then
  [[ -d $out ]] || die "$out exists and is not a directory"
  if [[ -n $(ls -A "$out") ]] && ! grep -qs "scripts/collect-third-party.sh" "$out/README.md"; then
    die "$out is not empty and not an earlier output of this script; refusing to replace it"
  fi
fi
mkdir -p "$(dirname "$out")"
stage=$(mktemp -d "$(dirname "$out")/.collect-third-party.XXXXXX")
work=$(mktemp -d)
trap 'rm -rf "$stage" "$work"' EXIT

files_total=0
for c in "${components[@]}"; do
  IFS='|' read -r name pkg root pattern _ debian_expected <<<"$c"
  list=$work/$name.files
  : >"$list"
  while IFS= read -r path; do
    [[ $path == "$root"/* ]] || continue
    rel=${path#"$root"/}
    [[ $rel =~ $pattern ]] || continue
    [[ -d $path ]] && continue
    [[ -f $path ]] || die "$pkg: dpkg lists $path but it is missing; reinstall $pkg"
    printf '%s\n' "$rel" >>"$list"
  done < <(dpkg -L "$pkg")
  n=$(wc -l <"$list")
  ((n > 0)) || die "$pkg: no file of it matches $root/$pattern"
  files_total=$((files_total + n))
  mkdir -p "$stage/$name/include"
  tar -C "$root" -chf - --verbatim-files-from -T "$list" | tar -C "$stage/$name/include" -xf - --no-same-owner
  check_copyright "/usr/share/doc/$pkg/copyright" "$pkg" "$debian_expected"
  install -m 0644 "/usr/share/doc/$pkg/copyright" "$stage/$name/copyright"
done

# The SQLite amalgamation, from the cache or built into it.
sqlite_source=$(dpkg-query -W -f='${source:Package}' libsqlite3-dev)
sqlite_version=$(dpkg-query -W -f='${source:Version}' libsqlite3-dev)
if [[ -n ${JOULE_THIRD_PARTY_CACHE:-} ]]; then
  cache_root=$JOULE_THIRD_PARTY_CACHE
elif [[ $(id -u) -eq 0 ]]; then
  cache_root=/var/cache/joule-third-party
else
  cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/joule-third-party
fi
cache=$cache_root/$sqlite_source/$sqlite_version
sqlite_how="from the cache $cache"

# fetch_source SOURCE VERSION BINARY: Debian's source package SOURCE at
# VERSION (that of the installed BINARY), unpacked with its patches into
# $work/apt/src/SOURCE; the deb-src lists are fetched once per run.
apt_updated=0
fetch_source() {
  local source=$1 version=$2 binary=$3 need=() p
  for p in dpkg-dev debian-archive-keyring; do installed "$p" || need+=("$p"); done
  ((${#need[@]} == 0)) ||
    die "fetching Debian's source of $binary needs: ${need[*]}; install them with: apt-get install ${need[*]} (or scripts/install-deps.sh)"
  local codename mirror security keyring apt=() t=$work/apt
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || die "no VERSION_CODENAME in /etc/os-release: which Debian release is this?"
  mirror=${JOULE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  security=${JOULE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  apt=(apt-get -q -o "Dir::Etc::SourceList=$t/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$t/lists" -o "Dir::Cache=$t/cache")
  if ((!apt_updated)); then
    mkdir -p "$t/lists/partial" "$t/cache/archives/partial" "$t/src"
    printf 'deb-src [signed-by=%s] %s\n' \
      "$keyring" "$mirror $codename main" "$keyring" "$mirror $codename-updates main" \
      "$keyring" "$security $codename-security main" >"$t/sources.list"
    if [[ $(id -u) -eq 0 ]] && id _apt >/dev/null 2>&1; then
      # apt downloads as _apt: let it reach the private directories.
      chmod 0755 "$work" "$t"
      chown _apt "$t/lists/partial" "$t/cache/archives/partial" "$t/src"
    fi
    "${apt[@]}" update >"$t/update.log" 2>&1 || { cat "$t/update.log" >&2; die "apt-get update of the deb-src lists failed"; }
    apt_updated=1
  fi
  echo "$me: fetching Debian's source package $source $version ($mirror, $codename)" >&2
  (cd "$t/src" && "${apt[@]}" source --download-only "$source=$version") >"$t/source-$source.log" 2>&1 || {
    cat "$t/source-$source.log" >&2
    die "apt-get source $source=$version failed; if the archive no longer has the installed version, upgrade it (apt-get install --only-upgrade $binary) and run again"
  }
  local dsc=$t/src/${source}_${version#*:}.dsc  # the file name has no epoch
  [[ -f $dsc ]] || die "apt-get source left no $dsc"
  (cd "$t/src" && dpkg-source -x "$dsc" "$source") >"$t/unpack-$source.log" 2>&1 ||
    { cat "$t/unpack-$source.log" >&2; die "dpkg-source -x $dsc failed"; }
}

# cache_fill DIR FILE...: FILE... into the cache directory DIR, atomically
# (another run may have filled it meanwhile).
cache_fill() {
  local dir=$1 new
  shift
  mkdir -p "$(dirname "$dir")" || die "cannot create $(dirname "$dir") (set JOULE_THIRD_PARTY_CACHE)"
  new=$(mktemp -d "$(dirname "$dir")/.new.XXXXXX")
  install -m 0644 "$@" "$new/"
  chmod 0755 "$new"
  mv -T "$new" "$dir" 2>/dev/null || rm -rf "$new"
}

build_sqlite() {
  local need=() p t=$work/apt
  for p in tcl gcc make; do installed "$p" || need+=("$p"); done
  ((${#need[@]} == 0)) ||
    die "building the SQLite amalgamation needs: ${need[*]}; install them with: apt-get install ${need[*]} (or scripts/install-deps.sh)"
  fetch_source "$sqlite_source" "$sqlite_version" libsqlite3-dev
  echo "$me: building the amalgamation (configure; make sqlite3.c)" >&2
  mkdir -p "$t/build"
  (cd "$t/build" && "../src/$sqlite_source/configure" && make -j"$(nproc)" sqlite3.c) >"$t/build.log" 2>&1 ||
    { tail -n 40 "$t/build.log" >&2; die "building sqlite3.c from $sqlite_source $sqlite_version failed"; }
  # The header made from the source must be the installed libsqlite3-dev's, as both are one version.
  cmp -s "$t/build/sqlite3.h" /usr/include/sqlite3.h ||
    die "the sqlite3.h built from $sqlite_source $sqlite_version differs from /usr/include/sqlite3.h (libsqlite3-dev $(version_of libsqlite3-dev))"
  check_copyright "$t/src/$sqlite_source/debian/copyright" "$sqlite_source (source)" "$sqlite_debian_licence"
  cache_fill "$cache" "$t/build/sqlite3.c" "$t/build/sqlite3.h" "$t/src/$sqlite_source/debian/copyright"
}
if ! [[ -f $cache/sqlite3.c && -f $cache/sqlite3.h && -f $cache/copyright ]]; then
  build_sqlite
  sqlite_how="built from Debian's source package and cached in $cache"
fi
mkdir -p "$stage/sqlite3"
install -m 0644 "$cache/sqlite3.c" "$cache/sqlite3.h" "$cache/copyright" "$stage/sqlite3/"
files_total=$((files_total + 2))

# fmt's compiled part (src/format.cc, from Debian's source package of the
# installed libfmt-dev): built once into a static library instead of fmt's
# header-only mode, which compiled it into every file that formats (+70% on
# a file's compile time, measured on src/measure/sampler.cc).
fmt_source=$(dpkg-query -W -f='${source:Package}' libfmt-dev)
fmt_version=$(dpkg-query -W -f='${source:Version}' libfmt-dev)
fmt_cache=$cache_root/$fmt_source/$fmt_version
if ! [[ -f $fmt_cache/format.cc ]]; then
  fetch_source "$fmt_source" "$fmt_version" libfmt-dev
  cache_fill "$fmt_cache" "$work/apt/src/$fmt_source/src/format.cc"
fi
mkdir -p "$stage/fmt/src"
install -m 0644 "$fmt_cache/format.cc" "$stage/fmt/src/"
files_total=$((files_total + 1))

# shellcheck disable=SC1091
{
  echo "# Third-party code in this source distribution"
  echo
  echo "Collected by scripts/collect-third-party.sh at packaging time from the Debian packages installed on the"
  echo "packaging machine ($(. /etc/os-release && echo "$PRETTY_NAME")); none of it is kept in joule's git repository."
  echo "Each directory holds the package's files unmodified and its Debian copyright file (\`copyright\`)."
  echo
  echo "| directory | Debian package | Debian version | licence | Debian copyright, \`Files: *\` |"
  echo "|---|---|---|---|---|"
  for c in "${components[@]}"; do
    IFS='|' read -r name pkg _ _ licence debian_expected <<<"$c"
    echo "| \`$name/\` | $pkg | $(version_of "$pkg") | $licence | $debian_expected |"
  done
  echo "| \`sqlite3/\` | $sqlite_source (source package; binary libsqlite3-dev $(version_of libsqlite3-dev)) | $sqlite_version | $sqlite_licence | $sqlite_debian_licence |"
  echo
  echo "\`sqlite3/sqlite3.c\` is the SQLite amalgamation made with upstream's \`make sqlite3.c\` from Debian's source"
  echo "package $sqlite_source $sqlite_version (upstream source and Debian's patches); its \`sqlite3.h\` is identical to"
  echo "libsqlite3-dev's. Debian's compile-time options (SQLITE_ENABLE_*, in the source package's debian/rules) are not"
  echo "in the amalgamation: they are flags of whoever compiles it."
} >"$stage/README.md"

chmod 0755 "$stage"
rm -rf "$out"
mv -T "$stage" "$out"
bytes=$(du -sb "$out" | cut -f1)
elapsed_ms=$((($(date +%s%N) - started_ns) / 1000000))
printf '%s: %s: %d components, %d files, %.1f MB in %d.%01d s; SQLite %s amalgamation %s\n' "$me" "$out" \
  $((${#components[@]} + 1)) "$files_total" "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" \
  $((elapsed_ms / 1000)) $((elapsed_ms % 1000 / 100)) "$sqlite_version" "$sqlite_how"
