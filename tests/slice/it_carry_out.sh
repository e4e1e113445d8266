#!/usr/bin/env bash
# Carry a ring out by hand (docs/operations.md): `pfr export --ring` cuts an hour out of a ring
# while another process appends to it; the slice reads back with the ring's flame graph of that
# hour; `pfr-shipper backfill --store` ships it from a read-only copy in another folder into
# ClickHouse with the rows shipping the ring gives, and shipping it again doubles nothing; bad
# input gets a clear error and leaves nothing behind.
# In tmpfs ($TMPDIR, cmake/PfrTestTmpfs.cmake), a folder of this run's own, removed when it passes:
# the store commits with an fsync each (~3 ms on the build tree's disk) and the two writers make
# ~6,000 commits.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pfr-slice.XXXXXX")
chmod 0755 "$WORK" # a user without rights of its own reads a slice below
source "$(dirname "$0")/../shipper/lib.sh"
say "working in $T (kept if the test fails)"
: "${PFR_QUERY:?}" "${SLICE_CHECK:?}"
need_chdb
PFR=$PFR_QUERY
S=1000000000
mkdir -p "$T/out" "$T/usb" "$T/usb-ro" "$T/elsewhere" "$T/home"

# ---- a 12 h ring, then a second writer appending other services while hours are cut out ----
mkring --services 2 --intervals 4320 --interval-s 10 --stacks 60 --seed 7 --end-ago-s 7200
read -r first last < <(ring_span)
from=$((first / S + 3 * 3600 + 1234)) # not on a chunk boundary: the edge chunks overlap it
to=$((from + 3600))
# (asked to stop once the exports below are done: it was left to write its 3,000 intervals, which
# took 55 s more than the exports in the sanitized tree; 20 transactions a second, 20 times a
# recorder at its fastest: each export still runs beside dozens of commits, and the writer no
# longer takes a core from the exports for all their time, ~1/4 of the test's CPU)
"$RINGTOOL" make --store "$T/ring.db" --services 2 --first-service 2 --intervals 3000 \
    --interval-s 10 --stacks 60 --seed 8 --end-ago-s 0 --stop-file "$T/stop-writer" \
    --pace-ms 50 >/dev/null &
WRITER=$!
PIDS+=("$WRITER")
wait_until 20 sh -c "\"$RINGTOOL\" chunks --store \"$T/ring.db\" | grep svc-2 >/dev/null" ||
    fail "the second writer did not start"
during=0 n=0
while kill -0 "$WRITER" 2>/dev/null; do
    "$PFR" --store "$T/ring.db" export --ring "$T/out/hour.db" --force --from "@$from" \
        --to "@$to" >"$T/export.log" 2>&1 || fail "export while recording: $(cat "$T/export.log")"
    "$PFR" --store "$T/ring.db" export --ring "$T/out/all.db" --force --from -1d --to now \
        >>"$T/export.log" 2>&1 || fail "export of everything while recording: $(cat "$T/export.log")"
    alive=0
    kill -0 "$WRITER" 2>/dev/null && alive=1
    "$SLICE_CHECK" "$T/out/all.db" >"$T/all.check" || fail "a slice cut while recording does not check"
    [ "$alive" = 1 ] && [ "$during" = 0 ] && cp "$T/all.check" "$T/all-during.check"
    during=$((during + alive)) n=$((n + 1))
    # six exports cut while it appends prove the case (as in slice_unit); more only took CPU
    # from the writer, each reading the whole ring (29 rounds: the test took 171 s of CPU in the
    # sanitized tree, 147 s with six)
    [ "$during" -lt 6 ] || break
done
touch "$T/stop-writer"
wait "$WRITER" || fail "the second writer failed"
[ "$during" -ge 2 ] || fail "only $during of $n exports ran while the writer appended"
say "$n exports, $during of them while the writer appended"
grep -q "^wrote $T/out/hour.db: 722 chunks" "$T/export.log" || fail "unexpected summary: $(cat "$T/export.log")"
all_chunks=$(sed -n 's/^chunks=\([0-9]*\) .*/\1/p' "$T/all-during.check")
ring_now=$("$RINGTOOL" chunks --store "$T/ring.db" | wc -l)
[ "$all_chunks" -gt 8640 ] && [ "$all_chunks" -lt "$ring_now" ] ||
    fail "a slice of everything cut while recording holds $all_chunks chunks (the ring now $ring_now)"

# ---- the slice is the ring's hour ----
"$SLICE_CHECK" "$T/out/hour.db" >"$T/hour.check" || fail "pfr_store_check fails on the slice"
grep -q " slice=1 from=$((from * S)) to=$((to * S)) " "$T/hour.check" ||
    fail "the slice does not say what it is: $(cat "$T/hour.check")"
for svc in svc-0 svc-1; do
    "$PFR" --store "$T/ring.db" flame --format folded --service $svc --from "@$from" --to "@$to" |
        LC_ALL=C sort >"$T/ring.$svc.folded"
    "$PFR" --store "$T/out/hour.db" flame --format folded --service $svc --from "@$from" --to "@$to" |
        LC_ALL=C sort >"$T/slice.$svc.folded"
    [ -s "$T/ring.$svc.folded" ] || fail "no flame graph of $svc from the ring"
    cmp -s "$T/ring.$svc.folded" "$T/slice.$svc.folded" || fail "the slice's flame graph of $svc differs"
done
"$RINGTOOL" totals --store "$T/ring.db" --from $((from * S)) --to $((to * S)) >"$T/ring.totals"
"$RINGTOOL" totals --store "$T/out/hour.db" >"$T/slice.totals"
cmp -s "$T/ring.totals" "$T/slice.totals" || fail "the slice's totals differ from the ring's hour"
"$PFR" --store "$T/out/hour.db" ls >"$T/ls.txt" || fail "pfr ls cannot read the slice"
grep -q "service svc-0" "$T/ls.txt" && ! grep -q "service svc-2" "$T/ls.txt" ||
    fail "pfr ls of the slice: $(cat "$T/ls.txt")"
ring_bytes=$(($(stat -c %s "$T/ring.db") + $(stat -c %s "$T/ring.db-wal")))
slice_bytes=$(stat -c %s "$T/out/hour.db")
# An hour cut at any time carries the layers of at most two chains a stream: a drifting stream's
# chain is rotated at each hour of the clock (docs/store.md, Tiers), and a chunk needs its chain's
# layers from the base on. So at most 2 h of the ring's 12 h and more: a sixth.
[ $((slice_bytes * 6)) -lt "$ring_bytes" ] ||
    fail "the slice of one hour takes $slice_bytes bytes, the ring's 12 h and more $ring_bytes"
say "one hour: $slice_bytes bytes; the ring: $ring_bytes bytes"
[ -z "$(ls -A "$T/out" | grep -v -x -e hour.db -e all.db)" ] || fail "files left beside the slices: $(ls -A "$T/out")"

# ---- shipped: the ring's hour, and the slice from a read-only copy elsewhere ----
start_front
# as the package installs it: the daemon's state in the config file, which a slice must not take
printf '[shipper]\nstate = %s\n' "$T/daemon-state.db" >"$T/shipper.ini"
CH=(--config "$T/shipper.ini" --sink clickhouse --url "http://127.0.0.1:$CH_PORT"
    --api-key-file "$T/chkey" --user pfr --create-tables --progress 100ms --log-level info)
"$SHIPPER" backfill --store "$T/ring.db" --state "$T/live-state.db" "${CH[@]}" \
    --database coroot_live --from "@$from" --to "@$to" >"$T/live.log" 2>&1 ||
    fail "backfill of the ring failed: $(tail -3 "$T/live.log")"
cp "$T/out/hour.db" "$T/usb/hour.db"
snap() { (cd "$T/usb" && ls -lA --full-time && md5sum ./*); }
snap >"$T/usb.before"
# in a mount namespace of its own where $T/usb-ro is $T/usb read-only, from another folder
in_ro() {
    unshare -m bash -c 'mount --bind "$1/usb" "$1/usb-ro" && mount -o remount,bind,ro "$1/usb-ro" &&
        cd "$1/elsewhere" && shift && exec "$@"' _ "$T" "$@"
}
in_ro "$PFR" --store "$T/usb-ro/hour.db" flame --format folded --service svc-0 --from "@$from" \
    --to "@$to" | LC_ALL=C sort >"$T/ro.folded"
cmp -s "$T/ring.svc-0.folded" "$T/ro.folded" || fail "pfr reads the slice on a read-only medium otherwise"
# $HOME holds the slice's state
ship_slice() {
    in_ro env HOME="$T/home" "$SHIPPER" backfill --store "$T/usb-ro/hour.db" "${CH[@]}" \
        --database coroot_slice "$@"
}
ship_slice >"$T/slice1.log" 2>&1 || fail "backfill of the slice failed: $(tail -3 "$T/slice1.log")"
grep -q "backfill to clickhouse: 722/722 chunks (100.0%).*done" "$T/slice1.log" ||
    fail "the slice's backfill did not send its 722 chunks: $(cat "$T/slice1.log")"
snap >"$T/usb.after"
cmp -s "$T/usb.before" "$T/usb.after" || fail "shipping wrote beside the slice: $(diff "$T/usb.before" "$T/usb.after")"
ls "$T"/home/.local/state/pfr/slice-*.db >/dev/null 2>&1 || fail "no state file of the slice in ~/.local/state/pfr"
[ ! -e "$T/daemon-state.db" ] || fail "the slice's backfill took the daemon's state file"
dump() {
    chq_db "$1" "SELECT ServiceName, Type, Start, End, toString(Labels), StackHash, Value
                 FROM profiling_samples
                 ORDER BY ServiceName, Type, Start, End, toString(Labels), StackHash, Value
                 FORMAT TSV"
    chq_db "$1" "SELECT ServiceName, Hash, LastSeen, Stack FROM profiling_stacks FINAL
                 ORDER BY ServiceName, Hash FORMAT TSV"
}
dump coroot_live >"$T/live.dump"
dump coroot_slice >"$T/slice.dump"
want=$(awk -F'\t' '{s += $4} END {printf "%.0f\n", s}' "$T/ring.totals")
[ "$(chq_db coroot_live "SELECT sum(Value) FROM profiling_samples")" = "$want" ] ||
    fail "the ring's backfill did not send the hour"
cmp -s "$T/live.dump" "$T/slice.dump" || fail "the slice gives other rows than the ring: $(diff "$T/live.dump" "$T/slice.dump" | head -5)"
say "ClickHouse rows from the slice = from the ring: $(wc -l <"$T/slice.dump") lines"
ship_slice >"$T/slice2.log" 2>&1 || fail "second backfill of the slice failed"
dump coroot_slice >"$T/slice2.dump"
cmp -s "$T/live.dump" "$T/slice2.dump" || fail "shipping the slice twice doubled rows"
# another laptop: a state of its own, the same batches and tokens
ship_slice --state "$T/elsewhere/other.db" >"$T/slice3.log" 2>&1 || fail "backfill with a new state failed"
dump coroot_slice >"$T/slice3.dump"
cmp -s "$T/live.dump" "$T/slice3.dump" || fail "shipping the slice with another state doubled rows"

# ---- the shipper refuses what would go wrong ----
expect() { # expect CODE PATTERN CMD...: CMD exits CODE and says PATTERN
    local code=$1 pat=$2 rc=0
    shift 2
    "$@" >"$T/expect.log" 2>&1 || rc=$?
    [ "$rc" = "$code" ] || fail "$* exited $rc, not $code: $(cat "$T/expect.log")"
    grep -q -- "$pat" "$T/expect.log" || fail "$* did not say \"$pat\": $(cat "$T/expect.log")"
}
inst() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT value FROM meta WHERE key='instance'\").fetchone()[0])" "$1"; }
live_inst=$(inst "$T/live-state.db")
expect 2 "is a ring slice" "$SHIPPER" --once --store "$T/out/hour.db" --state "$T/x.db" "${CH[@]}" --database coroot_slice
expect 2 "backfill needs --from and --to" "$SHIPPER" backfill --store "$T/ring.db" --state "$T/x.db" "${CH[@]}" --database coroot_live
expect 1 "belongs to a ring" "$SHIPPER" backfill --store "$T/out/hour.db" --state "$T/live-state.db" "${CH[@]}" --database coroot_slice
[ "$(inst "$T/live-state.db")" = "$live_inst" ] || fail "a refused slice backfill changed the ring's state"
expect 1 "belongs to another slice" "$SHIPPER" backfill --store "$T/out/all.db" --state "$T/elsewhere/other.db" "${CH[@]}" --database coroot_slice

# ---- bad input to pfr export --ring: a clear error, nothing left behind ----
out=$T/out/bad.db
expect 2 "empty range" "$PFR" --store "$T/ring.db" export --ring "$out" --from "@$to" --to "@$from"
sum=$(md5sum <"$T/out/hour.db")
expect 1 "exists (give --force" "$PFR" --store "$T/ring.db" export --ring "$T/out/hour.db" --from "@$from" --to "@$to"
[ "$(md5sum <"$T/out/hour.db")" = "$sum" ] || fail "a refused export changed the existing file"
expect 3 "no chunk of the ring matches" "$PFR" --store "$T/ring.db" export --ring "$out" --from "@$((first / S - 7200))" --to "@$((first / S - 3600))"
expect 3 "no chunk" "$PFR" --store "$T/ring.db" export --ring "$out" --service nosuch --from -1d --to now
expect 2 "not by sample labels" "$PFR" --store "$T/ring.db" export --ring "$out" --label pid=1 --from -1d --to now
expect 2 "for pprof output" "$PFR" --store "$T/ring.db" export --ring "$out" -o x.pb.gz
expect 2 "goes with --ring" "$PFR" --store "$T/ring.db" export --force -o "$T/out/x.pb.gz"
expect 1 "no folder" "$PFR" --store "$T/ring.db" export --ring "$T/out/no/such/x.db" --from -1d --to now
mkdir -p "$T/locked" "$T/pub"
expect 1 "Read-only file system" unshare -m bash -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
    _ "$T/locked" "$PFR" --store "$T/ring.db" export --ring "$T/locked/x.db" --from "@$from" --to "@$to"
# a user who may read the ring but not write the folder
cp "$T/out/hour.db" "$T/pub/hour.db"
chmod 755 "$T/pub" "$T/locked" && chmod 644 "$T/pub/hour.db"
expect 1 "Permission denied" setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$PFR" --store "$T/pub/hour.db" export --ring "$T/locked/x.db" --from "@$from" --to "@$to"
[ -z "$(ls -A "$T/locked")" ] || fail "a refused export left files: $(ls -A "$T/locked")"
[ -z "$(ls -A "$T/out" | grep -v -x -e hour.db -e all.db)" ] || fail "a refused export left files: $(ls -A "$T/out")"
cleanup
trap - EXIT
rm -rf "$WORK"
echo PASS
