#!/usr/bin/env bash
# Installs libchdb.so (ClickHouse 26 embedded as a library, npm package @chdb/lib-linux-x64-gnu)
# into a fixed cache directory, for the ClickHouse front the shipper's tests run against (not
# under /var/cache/pfr: that is the package's own cache directory, removed when it is purged, as
# package_deb does).
# Idempotent: once the pinned version is there it touches nothing (and needs no network).
# Prints the path of libchdb.so on stdout.
#   PFR_CHDB_DIR      cache directory (default /var/cache/pfr-test/chdb)
#   PFR_CHDB_VERSION  package version (default 26.5.3)
set -euo pipefail

VERSION=${PFR_CHDB_VERSION:-26.5.3}
DIR=${PFR_CHDB_DIR:-/var/cache/pfr-test/chdb}
PKG=@chdb/lib-linux-x64-gnu
LIB=$DIR/node_modules/$PKG/libchdb.so
MARK=$DIR/.installed-$VERSION

if [ -f "$MARK" ] && [ -s "$LIB" ]; then
    echo "$LIB"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-chdb: npm is missing (Debian package: npm)" >&2
    exit 1
fi
mkdir -p "$DIR"
# A private prefix: no package.json of ours, no lock file, nothing global.
npm install --prefix "$DIR" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error "$PKG@$VERSION" >&2
if [ ! -s "$LIB" ]; then
    echo "setup-chdb: $LIB not found after npm install" >&2
    exit 1
fi
rm -f "$DIR"/.installed-*
touch "$MARK"
echo "$LIB"
