#!/usr/bin/env bash
# Makes DIR's node_modules (playwright-core, from its package-lock.json) ready: npm ci when it is
# missing. Under a lock on DIR: tests run in parallel, and a second script that found a half-made
# node_modules would start Chromium from it and fail.
#   npm-ready.sh DIR
set -euo pipefail
DIR=$1
exec 9<"$DIR"
flock 9
if [ ! -f "$DIR/node_modules/playwright-core/package.json" ]; then
    echo "installing playwright-core (npm ci in $DIR)"
    (cd "$DIR" && timeout 300 npm ci --no-audit --no-fund >/dev/null)
fi
