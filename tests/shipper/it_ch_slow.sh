#!/usr/bin/env bash
# A server slower than the request timeout: the shipper gives up on the request and retries;
# the slow insert is stored anyway after the client left, and the retry (same token) is dropped
# by ClickHouse's deduplication: nothing doubled.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 4 --stacks 60 --seed 51
start_front --fault slow --delay-ms 2500 --fault-count 1 --fault-match "INSERT INTO profiling_samples"
ship_ch --once --timeout 1s >"$T/ship.log" 2>&1 || fail "shipper failed"
grep -Eiq "attempt 1 failed: .*time" "$T/ship.log" || fail "no timeout seen: $(grep failed "$T/ship.log" | head -2)"
tok=$(awk '/fault=slow/ {for (i = 1; i <= NF; i++) if ($i ~ /^token=/) print substr($i, 7); exit}' "$T/front.log")
stored_twice() { [ "$(grep -c "status=200 .*token=$tok q=INSERT INTO profiling_samples" "$T/front.log")" -ge 2 ]; }
wait_until 10 stored_twice || fail "the timed-out insert was not both stored and retried with the same token"
check_ch_exact
echo PASS
