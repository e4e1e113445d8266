#!/usr/bin/env bash
# Renders a flame graph (svg, html) and a diff (html) with pfr from real rings, and pages of
# hostile service and function names, then checks them in headless Chromium (browser_test.mjs, playwright-core driving /usr/bin/chromium).
# Screenshots: ARTIFACTS/*.png.
#   browser_test.sh PFR MAKE_RING WORKDIR ARTIFACTS
set -euo pipefail
PFR=$1
MK=$2
W=$3
ART=$4
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"
mkdir -p "$W" "$ART"
export TZ=UTC
bash "$HERE/../npm-ready.sh" "$HERE"
T0=1714564800
"$MK" "$W/ring.db" testgen --chunks 60 --start $T0
"$MK" "$W/shift.db" shift --chunks 60 --start $T0
"$PFR" --store "$W/ring.db" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/flame.svg"
"$PFR" --store "$W/ring.db" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/flame.html"
"$PFR" --store "$W/shift.db" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) -o "$W/diff.html"
"$PFR" --store "$W/shift.db" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) -o "$ART/diff.svg"
cp "$W/flame.svg" "$W/flame.html" "$W/diff.html" "$ART/"
# Service and function names with markup, quotes, control characters; a very long one.
"$MK" "$W/names.db" names --chunks 30 --start $T0
NR="--from $T0 --to $((T0 + 300))"
"$PFR" --store "$W/names.db" flame $NR -o "$W/names-all.html"
"$PFR" --store "$W/names.db" flame $NR -o "$W/names-all.svg"
"$PFR" --store "$W/names.db" diff --from $((T0 + 150)) --to $((T0 + 300)) -o "$W/names-diff.html"
"$PFR" --store "$W/names.db" flame $NR --service '<!--<script><img src=x onerror=alert(1)>"'"'"'&amp;</script>' \
    --search '</script><script>alert(3)</script>' -o "$W/names-markup.html"
"$PFR" --store "$W/names.db" flame $NR --service '<!--<script><img src=x onerror=alert(1)>"'"'"'&amp;</script>' \
    -o "$W/names-markup.svg"
"$PFR" --store "$W/names.db" flame $NR --service $'semi;colon\nnew line\x1b[31mred\x1b[0m' -o "$W/names-control.svg"
"$PFR" --store "$W/names.db" flame $NR --service "/k8s/long/$(printf 'x%.0s' $(seq 2000))" -o "$W/names-long.html"
node "$HERE/browser_test.mjs" --svg "$W/flame.svg" --html "$W/flame.html" \
    --diff-html "$W/diff.html" --red hot_after --green hot_before \
    --names-html "$W/names-all.html,$W/names-diff.html,$W/names-markup.html,$W/names-long.html" \
    --names-svg "$W/names-all.svg,$W/names-markup.svg,$W/names-control.svg" --out "$ART"
