#!/usr/bin/env bash
# The connection is reset while inserts arrive (twice): retried, everything stored once.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 6 --stacks 60 --seed 31
start_front --fault reset --fault-count 2 --fault-match "INSERT INTO profiling_samples"
ship_ch --once --batch-chunks 4 >"$T/ship.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship.log")"
[ "$(grep -c "fault=reset" "$T/front.log")" = 2 ] || fail "the resets did not happen"
grep -Eq "attempt 1 failed: .*(reset|Empty reply|Send failure|Recv failure)" "$T/ship.log" ||
    fail "no reset seen by the shipper: $(grep failed "$T/ship.log" | head -2)"
check_ch_exact
check_ch_order
read -r a b < <(ring_span)
compare_flame "$a" "$b"
echo PASS
