#!/usr/bin/env bash
# A sink that lies: 200 with an HTML page instead of ClickHouse's answers, first to the schema
# check, then to inserts. The shipper does not take it for a stored batch: it retries, and
# everything arrives once when the real server answers again.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 3 --stacks 60 --seed 71 --end-ago-s 300
start_front --fault garbage --fault-count 2 --fault-match "system.columns"
ship_ch --once >"$T/ship1.log" 2>&1 || fail "shipper failed"
grep -q "tables in database coroot: profiling_samples.ServiceName is missing" "$T/ship1.log" ||
    fail "the lying schema answer was not caught: $(grep failed "$T/ship1.log" | head -2)"
check_ch_exact

mkring --services 2 --intervals 3 --stacks 60 --seed 72 --end-ago-s 0
ch_fault "mode=garbage&count=3&match=INSERT%20INTO%20profiling_samples"
ship_ch --once >"$T/ship2.log" 2>&1 || fail "shipper failed"
grep -q "but the answer is not a stored insert" "$T/ship2.log" || fail "the lying insert answer was not caught"
[ "$(grep -c "fault=garbage" "$T/front.log")" = 5 ] || fail "the lies did not all happen"
[ "$(status_field clickhouse retries)" -ge 5 ] || fail "lies not counted as failed attempts"
check_ch_exact
check_ch_order
echo PASS
