#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# A screenshot of a whole joule page (a report, the simulate page) as a
# reader at WIDTH CSS pixels sees it, as tall as the page is at that width:
#   scripts/page-screenshot.sh PAGE.html WIDTH OUT.png
# Headless Chromium keeps its window at least 500 px wide, so the page is laid
# out in an iframe of WIDTH inside it (the way the tests check pages).
set -euo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 PAGE.html WIDTH OUT.png" >&2
  exit 2
fi
page=$(realpath "$1")
width=$2
out=$3
[[ -f $page ]] || { echo "$0: no page at $1" >&2; exit 1; }
[[ $width =~ ^[0-9]+$ && $width -ge 200 && $width -le 4000 ]] || { echo "$0: WIDTH $width is not 200-4000" >&2; exit 2; }
chromium=${CHROMIUM:-chromium}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --allow-file-access-from-files --user-data-dir="$work/profile")
window=$(( width < 500 ? 500 : width ))

# 1. The page's height at that width.
cat > "$work/measure.html" <<EOF
<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="file://$page" style="border:0;width:${width}px;height:1000px"></iframe>
<script>document.getElementById('f').addEventListener('load', function () {
  document.body.setAttribute('data-height', this.contentDocument.documentElement.scrollHeight);
});</script></body></html>
EOF
height=$(timeout 120 "$chromium" "${flags[@]}" --window-size="$window,1000" --dump-dom "file://$work/measure.html" 2>/dev/null |
         sed -n 's/.*data-height="\([0-9]*\)".*/\1/p' | head -1)
[[ -n $height ]] || { echo "$0: Chromium did not lay the page out" >&2; exit 1; }

# 2. The page at that width and height.
cat > "$work/shot.html" <<EOF
<!DOCTYPE html><html><body style="margin:0;overflow:hidden"><iframe src="file://$page" style="border:0;width:${width}px;height:${height}px"></iframe></body></html>
EOF
timeout 120 "$chromium" "${flags[@]}" --window-size="$width,$height" --screenshot="$work/shot.png" "file://$work/shot.html" 2>/dev/null
[[ -s $work/shot.png ]] || { echo "$0: Chromium wrote no screenshot" >&2; exit 1; }
mv "$work/shot.png" "$out"
echo "$out: $width x $height"
