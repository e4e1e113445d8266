#!/bin/bash
# Peak RSS of pfr-recorder while a process maps a huge library and burns CPU in it: ClickHouse
# embedded (libchdb.so, 559 MB, 35 MB of .eh_frame) behind tests/shipper/ch_front, answering a
# loop of queries, so that the sampler asks for the library's unwind table. The recorder's
# promise is a peak under 64 MiB (tests/recorder/recorder_itest.py stress, release builds).
#
# Prints the recorder's VmHWM (peak RSS) at the end of the run and its unwind metrics, and the
# builder's own figures for the library (unwind_dump, capped as the recorder caps it).
#
# Usage (as root, release build):
#   bench_unwind_memory.sh --recorder BIN --front BIN [--dump BIN] [--lib PATH] [--seconds 20]
#                          [--table-bytes 16M] [--metrics-port 19466]
set -euo pipefail

recorder= front= dump= secs=20 table=16M port=19466
lib=/var/cache/pfr-test/chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so
while [ $# -gt 0 ]; do
    case $1 in
    --recorder) recorder=$2 ;;
    --front) front=$2 ;;
    --dump) dump=$2 ;;
    --lib) lib=$2 ;;
    --seconds) secs=$2 ;;
    --table-bytes) table=$2 ;;
    --metrics-port) port=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
[ -x "$recorder" ] && [ -x "$front" ] || { echo "need --recorder and --front" >&2; exit 2; }
[ -s "$lib" ] || { echo "$lib missing (tests/shipper/setup-chdb.sh)" >&2; exit 77; }

T=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT

"$front" --lib "$lib" --data "$T/chdata" --port 0 --port-file "$T/chport" --log "$T/front.log" \
    --user pfr --password chpw 2>>"$T/front.err" &
pids+=($!)
for _ in $(seq 600); do [ -s "$T/chport" ] && break; sleep 0.1; done
[ -s "$T/chport" ] || { echo "ch_front did not start" >&2; cat "$T/front.err" >&2; exit 1; }
chport=$(cat "$T/chport")
# CPU in the library: one query after the other, each a second or so of work
query="SELECT sum(cityHash64(number)) FROM numbers(30000000)"
(while :; do
    curl -sS -u pfr:chpw "http://127.0.0.1:$chport/" --data-binary "$query" >/dev/null 2>&1 ||
        sleep 0.2
done) &
pids+=($!)

: >"$T/empty.ini" # not the host's /etc/pfr/recorder.ini
"$recorder" --config "$T/empty.ini" --store "$T/ring.db" --interval 2 \
    --unwind-table-bytes "$table" --metrics-listen "127.0.0.1:$port" >"$T/recorder.log" 2>&1 &
rec=$!
pids+=($rec)
# VmRSS each second, to tell the table build's peak from the recorder's steady state
for i in $(seq "$secs"); do
    sleep 1
    printf '%s ' "$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$rec/status")"
done
echo "(VmRSS MiB, each second)"
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$rec/status")
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$rec/status")
echo "recorder: VmHWM $hwm KiB ($((hwm / 1024)) MiB), VmRSS at the end $rss KiB, after $secs s"
curl -sS "http://127.0.0.1:$port/metrics" |
    grep -E '^pfr_unwind_(files_total|table_bytes|table_build)' || true
kill -INT "$rec"
wait "$rec" || true
if [ -n "$dump" ]; then
    rows=$(numfmt --from=iec "$table")
    rows=$((rows / 8))
    "$dump" -q --max-rows "$rows" "$lib" 2>&1 || true
fi
