#!/usr/bin/env bash
# Chunks set aside (rejected by the sink) that the ring then evicts are lost like any chunk
# evicted before it was shipped: counted in lost_chunks, logged, and gone from the set-aside
# list — by the running daemon, and by a shipper started after the eviction.
source "$(dirname "$0")/lib.sh"
CAP=300000
ago=3000
record() { # one round of the recorder: more chunks into the capped ring
    ago=$((ago - 60))
    mkring --services 2 --intervals 4 --stacks 40 --seed $((200 + ago)) --max-bytes $CAP \
        --end-ago-s $ago
}
ring_stat() { "$RINGTOOL" stats --store "$T/ring.db" | awk -v k="$1" '$1 == k {print $2}'; }
max_id_of() { "$RINGTOOL" chunks --store "$T/ring.db" | awk -v s="$1" '$2 == s {m = $1} END {print m + 0}'; }

record
start_coroot --reject-service svc-1
ship_co --once >"$T/ship1.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship1.log")"
bad1=$(status_field coroot set_aside_chunks)
[ "$bad1" -gt 0 ] || fail "nothing was set aside"
last_bad=$(max_id_of svc-1)

say "the daemon runs while the ring evicts the $bad1 set-aside chunks (up to id $last_bad)"
# a round of the recorder may also evict one of its own chunks before the daemon ships it (a
# 300 kB ring holds about a round): lost too, counted by the ring as lost_unshipped
unshipped0=$(ring_stat lost_unshipped)
co_fault "reject_service="
ship_co_bg >"$T/daemon.log" 2>&1 &
SP=$!
PIDS+=("$SP")
caught_up() { [ "$(status_field coroot cursor)" = "$(ring_stat max_id)" ]; }
for i in $(seq 1 40); do
    record
    wait_until 30 caught_up || fail "the daemon does not keep up: $(tail -3 "$T/daemon.log")"
    [ "$(ring_stat min_id)" -gt "$last_bad" ] && break
done
[ "$(ring_stat min_id)" -gt "$last_bad" ] || fail "the ring never evicted the set-aside chunks"
reaped() { [ "$(status_field coroot set_aside_chunks)" = 0 ]; }
wait_until 30 reaped || fail "the daemon still lists evicted chunks as set aside"
unshipped=$(($(ring_stat lost_unshipped) - unshipped0))
[ "$(status_field coroot lost_chunks)" = $((bad1 + unshipped)) ] ||
    fail "the daemon counted $(status_field coroot lost_chunks) lost, want $bad1 set aside + $unshipped unshipped"
grep -q "sink coroot: $bad1 set-aside chunks (ids [0-9]*\.\.$last_bad) were evicted from the ring before they were shipped: counted as lost" \
    "$T/daemon.log" || fail "the daemon did not log the loss: $(grep -m2 evicted "$T/daemon.log")"
kill -TERM "$SP"
wait "$SP" || fail "the daemon did not stop cleanly"

say "chunks set aside, then evicted while no shipper runs"
co_fault "reject_service=svc-0"
record
ship_co --once >"$T/ship2.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship2.log")"
bad2=$(status_field coroot set_aside_chunks)
[ "$bad2" -gt 0 ] || fail "nothing was set aside the second time"
last_bad=$(max_id_of svc-0)
unshipped0=$(ring_stat lost_unshipped)
lost1=$(status_field coroot lost_chunks)
for i in $(seq 1 40); do
    record
    [ "$(ring_stat min_id)" -gt "$last_bad" ] && break
done
[ "$(ring_stat min_id)" -gt "$last_bad" ] || fail "the ring never evicted the set-aside chunks"
unshipped=$(($(ring_stat lost_unshipped) - unshipped0))
co_fault "reject_service="
ship_co --once >"$T/ship3.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship3.log")"
grep -q "sink coroot: $bad2 set-aside chunks (ids [0-9]*\.\.$last_bad) were evicted from the ring before they were shipped: counted as lost" \
    "$T/ship3.log" || fail "no startup count of the evicted set-aside chunks: $(grep -m2 evicted "$T/ship3.log")"
[ "$(status_field coroot set_aside_chunks)" = 0 ] || fail "evicted chunks are still listed as set aside"
want=$((lost1 + bad2 + unshipped))
[ "$(status_field coroot lost_chunks)" = "$want" ] ||
    fail "lost_chunks is $(status_field coroot lost_chunks), want $lost1 before + $bad2 set aside + $unshipped unshipped"
say "lost: $lost1 before, $bad2 set aside, $unshipped never shipped"
echo PASS
