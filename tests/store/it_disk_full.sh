#!/usr/bin/env bash
# Issue 24: the real pfr-recorder keeps its ring on a small tmpfs (16 MiB) that another program
# fills up. While the disk is full every interval is still written (the oldest chunks are given
# up, counted as evicted for disk space; nothing is dropped), the recorder killed with SIGKILL at
# random moments reopens a ring that checks clean every time and writes on, and once the filler
# is gone the ring grows back to its cap. Needs root (mount, BPF).
#   RECORDER=pfr-recorder RING_CHECK=ring_check PFR=pfr WORK=dir it_disk_full.sh
set -euo pipefail
: "${RECORDER:?}" "${RING_CHECK:?}" "${PFR:?}" "${WORK:?}"
T=$WORK/it_disk_full
MNT=$T/mnt
RING=$MNT/ring.db
CAP=2097152
INTERVAL=0.5
REC=
LOAD=

fail() {
    echo "FAIL (it_disk_full): $*" >&2
    [ -f "$T/recorder.log" ] && tail -20 "$T/recorder.log" >&2
    exit 1
}
say() { echo "--- $(date +%T) $*" >&2; }

cleanup() {
    set +e
    [ -n "$REC" ] && kill -9 "$REC" 2>/dev/null && wait "$REC" 2>/dev/null
    [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null && wait "$LOAD" 2>/dev/null
    mountpoint -q "$MNT" && umount -l "$MNT"
    return 0
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || fail "needs root (mount, BPF)"
mountpoint -q "$MNT" 2>/dev/null && umount -l "$MNT" # a run killed before its cleanup
rm -rf "$T"
mkdir -p "$MNT"
mount -t tmpfs -o size=16m,mode=0755 tmpfs "$MNT" || fail "cannot mount a tmpfs"

now_ns() { date +%s%N; }

start_recorder() {
    "$RECORDER" --store "$RING" --interval $INTERVAL --max-store-bytes $CAP --cpu-hz 250 \
        --metrics-listen 127.0.0.1:0 --go-heap-profiler disabled --scrape-local off \
        >>"$T/recorder.log" 2>&1 &
    REC=$!
}

# ring KEY: a statistic of the ring, after pfr_store_check passed.
ring() {
    "$RING_CHECK" "$RING" >"$T/check.out" 2>"$T/check.err" ||
        fail "ring check: $(cat "$T/check.err")"
    sed -n "s/^$1=//p" "$T/check.out"
}

# wait_until SECONDS CMD...: poll CMD until it succeeds.
wait_until() {
    local limit=$1 i
    shift
    for i in $(seq 1 $((limit * 5))); do
        "$@" && return 0
        sleep 0.2
    done
    return 1
}
bytes_at_least() { [ -e "$RING" ] && [ "$(ring file_bytes)" -ge "$1" ]; }
newer_than() { [ "$(ring newest_ns)" -gt "$1" ]; }

# covered FROM [after]: the chunks ending after FROM cover [FROM, newest] without a hole (every
# interval is in the ring; from its oldest chunk on when the ring has given up older ones; with
# "after", from the first of them on), and the newest is recent.
covered() {
    "$RING_CHECK" "$RING" --spans >"$T/spans" 2>"$T/check.err" ||
        fail "ring check: $(cat "$T/check.err")"
    python3 - "$1" "$(now_ns)" "$T/spans" "${2:-}" <<'EOF' || fail "intervals missing from the ring"
import sys
start, now, path, after = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
spans = sorted((int(a), int(b)) for _, a, b in
               (l.split() for l in open(path) if l.startswith("span ")))
if spans and spans[0][0] > start:
    start = spans[0][0]  # the ring gave up what it held from there
spans = [s for s in spans if s[1] > start]
if not spans:
    sys.exit("no chunk after the disk filled up")
first = min(s[0] for s in spans)
if first > start + 50_000_000 and after != "after":
    sys.exit(f"the first chunk after {start} starts {(first - start) / 1e9:.2f} s later")
end = spans[0][1]
for a, b in spans[1:]:
    if a > end + 50_000_000:
        sys.exit(f"hole of {(a - end) / 1e9:.2f} s in the ring at {end}")
    end = max(end, b)
if now - end > 3_000_000_000:
    sys.exit(f"the newest chunk ended {(now - end) / 1e9:.2f} s ago")
print(f"covered: {len(spans)} chunks, {(end - start) / 1e9:.1f} s", file=sys.stderr)
EOF
}

metric() {
    local port
    port=$(sed -n 's/.*metrics: .*(port \([0-9]*\)).*/\1/p' "$T/recorder.log" | tail -1)
    curl -sf "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'
}

# A workload of short processes with varied stacks, so that every interval has samples.
(while :; do
    find /usr/lib /usr/share -name '*.py' >/dev/null 2>&1
    gzip -c /etc/services >/dev/null
done) &
LOAD=$!

say "1. the recorder fills part of its ring ($CAP bytes cap)"
start_recorder
wait_until 40 bytes_at_least 1200000 || fail "the ring did not grow"

say "2. another program fills the file system"
dd if=/dev/zero of="$MNT/filler" bs=64k >/dev/null 2>&1 || true
FULL=$(now_ns)
free=$(ring fs_free_bytes)
[ "$free" -lt 65536 ] || fail "the file system still has $free bytes free"
evicted0=$(ring evicted_disk)
appended0=$(ring appended)
sleep 6
covered "$FULL"
# at least a chunk per interval was written (the ring may have given some up since)
[ "$(ring appended)" -ge $((appended0 + 10)) ] || fail "$(($(ring appended) - appended0)) chunks written in 6 s"
[ "$(ring evicted_disk)" -gt "$evicted0" ] || fail "no chunk was given up for the disk"
[ "$(ring dropped_disk)" = 0 ] || fail "$(ring dropped_disk) profiles dropped"
[ "$(ring cap_reason)" = disk_reserve ] || fail "cap in force: $(ring cap_reason)"
[ "$(metric pfr_store_write_errors_total)" = 0 ] || fail "write errors: $(metric pfr_store_write_errors_total)"
[ "$(metric pfr_store_disk_limited)" = 1 ] || fail "pfr_store_disk_limited is not 1"
[ "$(metric pfr_store_chunks_evicted_disk_total)" -gt 0 ] || fail "no disk evictions in the metrics"
[ "$(metric pfr_store_chunks_dropped_disk_full_total)" = 0 ] || fail "dropped chunks in the metrics"
"$PFR" --store "$RING" ls >"$T/ls.out" || fail "pfr ls failed"
grep -q "cap 2.0 MiB, effective .* MiB: disk free space reserve" "$T/ls.out" ||
    fail "pfr ls does not show the cap in force: $(head -3 "$T/ls.out")"

say "3. SIGKILL at random moments on the full disk, 4 times"
for i in 1 2 3 4; do
    sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
    kill -9 "$REC"
    wait "$REC" 2>/dev/null || true
    REC=
    KILLED=$(now_ns)
    ring chunks >/dev/null # pfr_store_check passes on the ring as the kill left it
    start_recorder
    wait_until 20 newer_than "$KILLED" || fail "no interval written after restart $i"
done
sleep 2
covered "$KILLED" after
[ "$(ring dropped_disk)" = 0 ] || fail "$(ring dropped_disk) profiles dropped"
[ "$(metric pfr_store_write_errors_total)" = 0 ] || fail "write errors after the restarts"

say "4. the filler is gone: the ring grows back to its cap"
rm -f "$MNT/filler"
wait_until 40 bytes_at_least $((CAP * 85 / 100)) || fail "the ring stayed at $(ring file_bytes) bytes"
[ "$(ring cap_reason)" = configured ] || fail "cap in force: $(ring cap_reason)"
[ "$(ring effective_max_bytes)" = $CAP ] || fail "effective cap $(ring effective_max_bytes)"
# At any moment, also between a commit and the checkpoint after it (the WAL is counted at its
# peak): 20 looks over 2 s, by stat (the files file_bytes sums). Not through ring_check: a
# reader's snapshot holds the WAL back from its checkpoint while the reader reads, and the
# commits after the last of those readers (two intervals) have cut the WAL back.
files() { (cd "$MNT" && stat -c %s ring.db ring.db-wal ring.db-spare 2>/dev/null || true) | awk '{s += $1} END {print s}'; }
sleep 1
for i in $(seq 1 20); do
    b=$(files)
    [ "$b" -le $((CAP + 65536)) ] ||
        fail "the ring outgrew its cap: $b bytes at look $i: $(cd "$MNT" && stat -c "%n %s" ring.db* | tr '\n' ' ')"
    sleep 0.1
done
covered "$KILLED" after
grep -q "short of the .* reserve" "$T/recorder.log" || fail "the recorder did not log the lowered cap"
echo PASS
