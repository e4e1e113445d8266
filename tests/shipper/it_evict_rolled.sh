#!/usr/bin/env bash
# A roll-up past the shipper's cursor is not a loss. The ring rolled its old chunks up before this
# sink existed (a roll-up keeps the smallest id of its inputs: the others' ids are gone, their data
# is not); then the sink is set up while its link is down, and the ring evicts those roll-ups
# unshipped. The sink counts as lost what the ring gave up past its cursor, one per chunk evicted
# (the ring's own count), not every id between its cursor and the ring's oldest chunk.
source "$(dirname "$0")/lib.sh"
CAP=1000000
ring_stat() { "$RINGTOOL" stats --store "$T/ring.db" | awk -v k="$1" '$1 == k {print $2}'; }
tier_rows() { sqlite3 "$T/ring.db" "SELECT count(*) FROM chunks WHERE tier > 0"; }
# ids between the oldest and the newest chunk that no chunk has: those a roll-up merged away
merged_ids() { sqlite3 "$T/ring.db" "SELECT max(id) - min(id) + 1 - count(*) FROM chunks"; }
# Ten minutes a round, until the ring holds roll-ups that merged ids away (a roll-up of a lone
# chunk merges none; the coarsest may be evicted in turn).
for r in $(seq 1 20); do
    mkring --services 2 --intervals 60 --stacks 400 --seed 7 --max-bytes $CAP \
        --end-ago-s $((30000 - 600 * r))
    [ "$(ring_stat evicted)" -gt 0 ] && [ "$(tier_rows)" -gt 0 ] && [ "$(merged_ids)" -gt 0 ] && break
done
rolled=$(tier_rows)
[ "$rolled" -gt 0 ] || fail "the ring holds no roll-up"
[ "$(merged_ids)" -gt 0 ] || fail "no roll-up merged an id away"
first=$(ring_stat min_id)
say "before the sink: $(ring_stat chunks) chunks ($rolled roll-ups), oldest id $first"
start_coroot && stop_coroot
rc=0
ship_co --once --deadline 1s >"$T/ship1.log" 2>&1 || rc=$?
[ "$rc" = 75 ] || fail "--once against a sink that is down should exit 75, got $rc"
lost0=$(ring_stat lost_unshipped)
# The recorder goes on while the link is down, until the roll-ups are evicted.
for r in $(seq 1 20); do
    mkring --services 2 --intervals 120 --stacks 400 --seed $((7 + r)) --max-bytes $CAP \
        --end-ago-s $((18000 - 1200 * r))
    [ "$(tier_rows)" = 0 ] && break
done
[ "$(tier_rows)" = 0 ] || fail "the ring never evicted its roll-ups"
lost=$(($(ring_stat lost_unshipped) - lost0))
gap=$(($(ring_stat min_id) - first))
say "ring: $lost chunks evicted past the sink's cursor; ids $first..$(($(ring_stat min_id) - 1)) gone ($gap)"
[ "$lost" -gt 0 ] || fail "the ring counted nothing lost"
[ "$gap" -gt "$lost" ] || fail "no id was merged away: the test proves nothing"
start_coroot
ship_co --once >"$T/ship2.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship2.log")"
[ "$(status_field coroot lost_chunks)" = "$lost" ] ||
    fail "the shipper counted $(status_field coroot lost_chunks) lost, the ring $lost"
[ "$(status_field coroot delivered_chunks)" = "$(ring_stat chunks)" ] ||
    fail "delivered $(status_field coroot delivered_chunks) of the ring's $(ring_stat chunks) chunks"
check_bodies
echo PASS
