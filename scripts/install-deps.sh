#!/usr/bin/env bash
# Installs every Debian package pfr's build, tests and benchmarks need.
# Idempotent; run as root on Debian bookworm.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PKGS=(
  build-essential cmake pkg-config clang llvm clang-format
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libzstd-dev libiberty-dev
  libsqlite3-dev sqlite3 liblz4-dev
  libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libmicrohttpd-dev libinih-dev libjansson-dev
  libcmocka-dev libclang-rt-14-dev
  golang-1.19-go linux-perf bpftrace xz-utils libc6-dbg
  chromium python3 procps util-linux libcap2-bin systemd iproute2 curl
)
# Newer Go toolchains (the Go heap profiler is tested against 1.19 to 1.23) come from
# bookworm-backports, which Debian pins low: adding it moves no other package.
BACKPORTS=(golang-1.21-go golang-1.22-go golang-1.23-go)
BPLIST=/etc/apt/sources.list.d/pfr-bookworm-backports.list

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
bp_missing=()
for p in "${BACKPORTS[@]}"; do installed "$p" || bp_missing+=("$p"); done

if [ ${#bp_missing[@]} -gt 0 ] && ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "deb http://deb.debian.org/debian bookworm-backports main" > "$BPLIST"
fi
if [ ${#missing[@]} -gt 0 ] || [ ${#bp_missing[@]} -gt 0 ]; then
  apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ${#bp_missing[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends -t bookworm-backports "${bp_missing[@]}"
fi
if ! command -v npm >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
# ClickHouse 26 embedded (libchdb, npm) for the shipper's ClickHouse tests and benchmark.
bash "$(dirname "$0")/../tests/shipper/setup-chdb.sh" >/dev/null
