#!/bin/sh
# Screenshot an HTML report with headless Chromium, the same way tests/reports/html_test.cpp renders it.
#   usage: docs/make-screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]
# e.g.   locksim run kleppmann-gc-pause -p redis --report html -o /tmp/k.html &&
#        docs/make-screenshot.sh /tmp/k.html docs/kleppmann-gc-pause.png
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
html=$1
png=$2
size=$(echo "${3:-1400x900}" | tr x ,)
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "$0: $chromium not found (Debian: apt-get install chromium)" >&2
  exit 2
fi
case $html in /*) ;; *) html=$(pwd)/$html ;; esac
case $png in /*) ;; *) png=$(pwd)/$png ;; esac
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars \
  --screenshot="$png" --window-size="$size" "file://$html" >/dev/null 2>&1
[ -s "$png" ] || { echo "$0: no screenshot written" >&2; exit 1; }
# A palette of 256 colours keeps a diagram sharp at a third of the size (Debian: apt-get install pngquant).
if command -v pngquant >/dev/null; then pngquant --force --skip-if-larger --output "$png" 256 -- "$png" || true; fi
echo "$png"
