#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Checks a man page (plain or .gz): man(1) and groff render it without a
# warning, and it has the sections a man page should have.
# With --commands-of PROGRAM, each subcommand its --help lists must have a
# subsection (.SS) of its own too.
# Usage: scripts/check-man-page.sh [--commands-of PROGRAM] PAGE [PAGE...]
set -euo pipefail
commands=()
if [[ ${1:-} == --commands-of ]]; then
  mapfile -t commands < <("$2" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
  [[ ${#commands[@]} -gt 0 ]] || { echo "check-man-page.sh: $2 --help lists no subcommands" >&2; exit 1; }
  shift 2
fi
sections=(NAME SYNOPSIS DESCRIPTION "EXAMPLES" FILES ENVIRONMENT "EXIT STATUS" "SEE ALSO")
status=0
for page in "$@"; do
  fail() { echo "check-man-page.sh: $page: $*" >&2; status=1; }
  source=$(if [[ $page == *.gz ]]; then gzip -dc "$page"; else cat "$page"; fi)
  # As lintian does (manpage-has-errors-from-man): any message fails.
  messages=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null) ||
    fail "man failed"
  [[ -z $messages ]] || fail "man warns: $messages"
  messages=$(printf '%s\n' "$source" | groff -man -Tutf8 -ww -z 2>&1) || fail "groff failed"
  [[ -z $messages ]] || fail "groff warns: $messages"
  for section in "${sections[@]}"; do
    grep -qx "\.SH \"\?$section\"\?" <<<"$source" || fail "no $section section"
  done
  grep -qE '^\.SH "?(OPTIONS|COMMANDS)"?$' <<<"$source" || fail "no OPTIONS or COMMANDS section"
  grep -q '^\.TH ' <<<"$source" || fail "no .TH line"
  grep -q '@[A-Z]*@' <<<"$source" && fail "a template placeholder is left"
  for command in "${commands[@]}"; do
    grep -qx "\.SS \"$command\"" <<<"$source" || fail "no subsection for $command"
  done
done
exit $status
