#!/usr/bin/env bash
# Tiered retention and shipping (docs/store.md, "Tiers"): the shipper takes two hours of the
# ring, then ClickHouse is down while the writer appends two half hours into a small (3 MiB) ring,
# which rolls the taken chunks up at each (only chunks every consumer has taken are merged; a roll-up keeps its
# inputs' smallest id, behind the cursor). When ClickHouse is back the shipper sends the rest:
# ClickHouse then holds exactly the ring's totals over the same range, no row twice.
source "$(dirname "$0")/lib.sh"
need_chdb
CAP=$((3 * 1024 * 1024))
# Chains rotate and tiers roll up at the clock's hours, so where the data falls in the hour
# decides when the ring fills: with the data on whole hours the first half hour of the outage
# fits without a roll-up. The writer's clock is fixed at a quarter past (an hour back, so that
# nothing is in the future).
export RINGTOOL_NOW_S=${RINGTOOL_NOW_S:-$(($(date +%s) / 3600 * 3600 - 2700))}
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
# Per service, over each stretch of time the ring still holds: ClickHouse's sum equals the
# ring's. The ring may have given up the coarsest of what was taken (ClickHouse keeps those), or,
# when roll-ups cannot make the room, the oldest of the tier below the coarsest: a gap between the
# hours and what is finer (until 2026-11-30 a retried append did that at 2 of 12 alignments in the
# hour). A stretch is a run of chunks each starting where the one before ended, or earlier.
"$RINGTOOL" chunks --store "$T/ring.db" | sort -t "$(printf '\t')" -k2,2 -k3,3n |
    awk -F '\t' '$2 != svc || $3 > end { if (svc != "") printf "%s %s %s %.0f\n", svc, first, end, sum
                                        svc = $2; first = $3; end = $4; sum = 0 }
                 { sum += $5; if ($4 > end) end = $4 }
                 END { if (svc != "") printf "%s %s %s %.0f\n", svc, first, end, sum }' \
    >"$T/stretches"
[ -s "$T/stretches" ] || fail "the ring is empty"
while read -r svc from to want; do
    got=$(chq "SELECT sum(Value) FROM profiling_samples WHERE ServiceName = '$svc' AND
               toUnixTimestamp64Nano(Start) >= $from AND toUnixTimestamp64Nano(Start) < $to")
    [ "$got" = "$want" ] || fail "$svc over [$from, $to): ClickHouse holds $got, the ring $want"
    say "$svc over [$from, $to): ClickHouse and the ring hold $got"
done <"$T/stretches"
dup=$(chq "SELECT count() FROM (SELECT ServiceName, Type, Start, StackHash, count() AS c
           FROM profiling_samples GROUP BY ServiceName, Type, Start, StackHash HAVING c > 1)")
[ "$dup" = 0 ] || fail "$dup sample rows doubled in ClickHouse"
echo PASS
