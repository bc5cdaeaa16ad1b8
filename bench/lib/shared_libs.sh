# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Sourced by the carry scripts (bench/carry.sh, bench/carry_recurring.sh).
# copy_shared_libs DEST BINARY...: the shared libraries the binaries load,
# all but the C and C++ runtimes (libc, libm, libstdc++, libgcc_s, ld.so),
# which every GPU machine has in a newer version, copied into DEST.
copy_shared_libs() {
  local dest=$1 lib
  shift
  for lib in $(ldd "$@" | awk '/=> \//{print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
      *) cp -L "$lib" "$dest/" ;;
    esac
  done
}
