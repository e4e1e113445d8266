#!/usr/bin/env bash
# Installs every Debian package pfr's build, tests and benchmarks need.
# Idempotent; run as root on Debian bookworm.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PKGS=(
  build-essential cmake pkg-config clang llvm clang-format
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libzstd-dev
  libsqlite3-dev sqlite3 liblz4-dev
  libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libmicrohttpd-dev libinih-dev libjansson-dev
  libcmocka-dev libclang-rt-14-dev
  golang-1.19-go linux-perf bpftrace
  chromium python3 procps util-linux libcap2-bin
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
