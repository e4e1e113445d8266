#!/usr/bin/env bash
# Tiered retention and shipping (docs/store.md, "Tiers"): the shipper takes two hours of the
# ring, then ClickHouse is down while the writer appends two half hours into a small (3 MiB) ring,
# which rolls the taken chunks up at each (only chunks every consumer has taken are merged; a roll-up keeps its
# inputs' smallest id, behind the cursor). When ClickHouse is back the shipper sends the rest:
# ClickHouse then holds exactly the ring's totals over the same range, no row twice.
source "$(dirname "$0")/lib.sh"
need_chdb
CAP=$((3 * 1024 * 1024))
make_part() { # $1: intervals of 10 s, $2: end, seconds ago
    mkring --services 3 --intervals "$1" --stacks 60 --seed 71 --end-ago-s "$2" --max-bytes "$CAP"
}
rolled() { "$PFR_QUERY" --store "$T/ring.db" ls --format json | sed -n 's/.*"rolled_up": *\([0-9]*\).*/\1/p' | head -1; }
lost() { "$PFR_QUERY" --store "$T/ring.db" ls --format json | sed -n 's/.*"lost_unshipped": *\([0-9]*\).*/\1/p' | head -1; }

make_part 720 7200
start_front
ship_ch --once --batch-chunks 200 >"$T/ship1.log" 2>&1 || fail "first shipment failed"
taken=$(chq "SELECT sum(Value) FROM profiling_samples")
say "taken before the outage: $taken"
stop_front
r0=$(rolled)
make_part 180 5400
r1=$(rolled)
make_part 180 3600
r2=$(rolled)
say "rolled up: $r0 before the outage, $r1 after its first half hour, $r2 after its second"
[ "$r1" -gt "$r0" ] && [ "$r2" -gt "$r1" ] || fail "the outage did not see two roll-ups ($r0, $r1, $r2)"
[ "$(lost)" = 0 ] || fail "the ring evicted $(lost) chunks the shipper had not taken (make CAP larger)"
"$PFR_QUERY" --store "$T/ring.db" ls | sed -n '1,3p' >&2
start_front
ship_ch --once --batch-chunks 200 >"$T/ship2.log" 2>&1 || fail "shipment after the outage failed"
# Per service, over the range the ring still holds (it may have evicted the coarsest of what was
# taken: ClickHouse keeps those): ClickHouse's sum equals the ring's.
"$RINGTOOL" chunks --store "$T/ring.db" |
    awk '{s[$2] += $5; if (!($2 in f) || $3 < f[$2]) f[$2] = $3} END {for (k in s) printf "%s %s %.0f\n", k, f[k], s[k]}' \
    >"$T/per_service"
[ -s "$T/per_service" ] || fail "the ring is empty"
while read -r svc first want; do
    got=$(chq "SELECT sum(Value) FROM profiling_samples WHERE ServiceName = '$svc' AND toUnixTimestamp64Nano(Start) >= $first")
    [ "$got" = "$want" ] || fail "$svc from $first: ClickHouse holds $got, the ring $want"
    say "$svc: ClickHouse and the ring hold $got"
done <"$T/per_service"
dup=$(chq "SELECT count() FROM (SELECT ServiceName, Type, Start, StackHash, count() AS c
           FROM profiling_samples GROUP BY ServiceName, Type, Start, StackHash HAVING c > 1)")
[ "$dup" = 0 ] || fail "$dup sample rows doubled in ClickHouse"
echo PASS
