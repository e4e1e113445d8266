#!/usr/bin/env bash
# The shipper is killed with SIGKILL in the middle of a batch (while ClickHouse works on its
# insert, which then lands), and at random moments; each restart re-sends the batch in flight
# with its token: nothing lost, nothing doubled.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 10 --stacks 60 --seed 81
start_front --fault slow --delay-ms 1500 --fault-match "INSERT INTO profiling_samples"
ship_ch_bg --batch-chunks 4 >"$T/ship1.log" 2>&1 &
SP=$!
PIDS+=("$SP")
wait_until 30 grep -q "fault=slow" "$T/front.log" || fail "no insert started"
kill -9 "$SP"
wait "$SP" 2>/dev/null || true
tok=$(awk '/fault=slow/ {for (i = 1; i <= NF; i++) if ($i ~ /^token=/) print substr($i, 7); exit}' "$T/front.log")
wait_until 10 grep -q "status=200 .*token=$tok q=INSERT INTO profiling_samples" "$T/front.log" ||
    fail "the insert in flight did not land"
ch_fault "mode=none"
say "killed during batch $tok, which landed after the shipper died"

# A few more kills at random moments.
for i in 1 2 3; do
    ship_ch_bg --batch-chunks 3 >"$T/ship-k$i.log" 2>&1 &
    SP=$!
    PIDS+=("$SP")
    sleep "0.$((RANDOM % 6 + 1))"
    kill -9 "$SP" 2>/dev/null || true
    wait "$SP" 2>/dev/null || true
done
ship_ch --once --batch-chunks 3 >"$T/ship2.log" 2>&1 || fail "restart failed: $(tail -3 "$T/ship2.log")"
[ "$(grep -c "token=$tok q=INSERT INTO profiling_samples" "$T/front.log")" -ge 2 ] ||
    fail "the batch in flight was not re-sent with its token"
check_ch_exact
check_ch_order
echo PASS
