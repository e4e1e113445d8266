#!/usr/bin/env bash
# The ring evicts chunks the shipper has not sent (the sink was down and the ring is small):
# the ring counts them as lost-unshipped, the shipper says so, counts them, and carries on with
# what is left. --once gives up after its deadline with exit 75 while the sink is down.
source "$(dirname "$0")/lib.sh"
CAP=300000
mkring --services 2 --intervals 2 --stacks 40 --seed 91 --max-bytes $CAP --end-ago-s 3000
start_coroot && stop_coroot
rc=0
ship_co --once --deadline 1s >"$T/ship1.log" 2>&1 || rc=$?
[ "$rc" = 75 ] || fail "--once against a sink that is down should exit 75, got $rc"
# The recorder goes on writing while the sink is down, until the ring has to evict.
for r in $(seq 1 25); do
    mkring --services 2 --intervals 10 --stacks 40 --seed $((91 + r)) --max-bytes $CAP \
        --end-ago-s $((3000 - 100 * r))
    lost=$("$RINGTOOL" stats --store "$T/ring.db" | awk '/^lost_unshipped/ {print $2}')
    [ "$lost" -gt 0 ] && break
done
evicted=$("$RINGTOOL" stats --store "$T/ring.db" | awk '/^evicted/ {print $2}')
say "ring: $evicted evicted, $lost lost-unshipped"
[ "$lost" -gt 0 ] || fail "the ring counted no lost-unshipped chunks"
start_coroot
ship_co --once >"$T/ship2.log" 2>&1 || fail "shipper failed after the eviction"
grep -q "were evicted from the ring before they were shipped" "$T/ship2.log" || fail "no warning about lost chunks"
[ "$(status_field coroot lost_chunks)" = "$lost" ] || fail "the shipper counted $(status_field coroot lost_chunks) lost, the ring $lost"
[ "$(status_field coroot ring_lost_unshipped)" = "$lost" ] || fail "status does not show the ring's count"
check_bodies
check_coroot_order 0
echo PASS
