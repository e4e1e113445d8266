#!/usr/bin/env bash
# Installs the Debian packages pfr needs. Idempotent; run as root on Debian bookworm.
#   scripts/install-deps.sh          what building and running pfr takes (scripts/run.sh): the
#                                    compilers and libraries; no browser, Go or Node
#   scripts/install-deps.sh --test   that and the test toolchain (scripts/test.sh): cmocka,
#                                    sanitizer runtimes, Go toolchains, perf, bpftrace, Chromium,
#                                    Node and npm, ClickHouse embedded, the packaging tools,
#                                    OpenJDK 17
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
TEST=0
case "${1:-}" in
--test) TEST=1 ;;
"") ;;
*)
  echo "usage: $0 [--test]" >&2
  exit 2
  ;;
esac

# Building and running: cmake, the BPF compiler (clang, bpftool), the libraries linked.
PKGS=(
  build-essential cmake pkg-config clang llvm
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libiberty-dev
  libsqlite3-dev liblz4-dev
  libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libmicrohttpd-dev libinih-dev libjansson-dev
)
BACKPORTS=()
if [ "$TEST" = 1 ]; then
  PKGS+=(
    clang-format libzstd-dev sqlite3
    libcmocka-dev libclang-rt-14-dev fuse3 libfuse3-dev
    golang-1.19-go linux-perf bpftrace xz-utils libc6-dbg
    chromium python3 procps util-linux libcap2-bin systemd iproute2 curl openssl
    # tests/python: Debian's CPython 3.11 and its headers (the layout checked against them)
    python3.11 libpython3.11-dev
    # the .deb (cmake/Packaging.cmake, tests/package): dpkg-shlibdeps, lintian
    dpkg-dev lintian
    # scripts/gen-vmlinux.py: an x86 kernel's zstd-compressed payload
    zstd
    # tests/java: HotSpot JVMs to attach to (javac builds the workload; jcmd is the oracle)
    openjdk-17-jdk-headless
    # tests/bench/busy/heap_owners.py: the recorder's heap by owner
    heaptrack
    # tests/java: the Java workload's javac, the JVM's own Flight Recorder, the JDK's jfr tool
    openjdk-17-jdk-headless
    # common_systemd_unit reads their timer-started units' files (apt-daily, e2scrub_all, fstrim)
    apt e2fsprogs
  )
  # Newer Go toolchains (the Go heap profiler is tested against 1.19 to 1.23) come from
  # bookworm-backports, which Debian pins low: adding it moves no other package.
  BACKPORTS=(golang-1.21-go golang-1.22-go golang-1.23-go)
fi
BPLIST=/etc/apt/sources.list.d/pfr-bookworm-backports.list

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep "install ok installed" >/dev/null; }

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
[ "$TEST" = 1 ] || exit 0
if ! command -v npm >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
# ClickHouse 26 embedded (libchdb, npm) for the shipper's ClickHouse tests and benchmark.
bash "$(dirname "$0")/../tests/shipper/setup-chdb.sh" >/dev/null
# playwright-core for the browser tests (pinned by each folder's package-lock.json).
for d in tests/serve tests/query; do
  bash "$(dirname "$0")/../tests/npm-ready.sh" "$(dirname "$0")/../$d" >/dev/null
done
