#!/usr/bin/env bash
# --bandwidth caps the bytes per second sent; SIGTERM during a long request stops the daemon
# at once (the request is abandoned, the chunk stays for the next run) with exit 0.
source "$(dirname "$0")/lib.sh"
mkring --services 1 --intervals 8 --seed 131 --end-ago-s 300
start_coroot
ship_co_bg --bandwidth 200k --batch-chunks 2 >"$T/ship.log" 2>&1 &
SP=$!
PIDS+=("$SP")
wait_until 60 count_is " 200 service=" "$T/coroot.log" 8 || fail "not everything arrived"
# Each body may only start once the ones before it had their time at the capped rate.
read -r t0 t1 bytes < <(awk '/ 200 service=/ {if (!f) f = $1; l = $1; b += last; last = substr($7, 7)} END {print f, l, b}' "$T/coroot.log")
say "$bytes bytes before the last body, spread over $((t1 - t0)) ms"
min=$((bytes * 1000 / (200 * 1024)))
[ $((t1 - t0)) -ge $((min * 9 / 10)) ] || fail "sent faster than the cap: $((t1 - t0)) ms < $min ms"
kill -TERM "$SP"
wait "$SP" || fail "exit status after SIGTERM"

mkring --services 1 --intervals 1 --seed 132 --end-ago-s 0
co_fault "mode=slow&count=1&delay_ms=8000"
ship_co_bg --timeout 20s >"$T/ship2.log" 2>&1 &
SP=$!
PIDS+=("$SP")
wait_until 20 grep -q "fault=slow" "$T/coroot.log" || fail "the slow request did not start"
s=$(date +%s%N)
kill -TERM "$SP"
wait "$SP" || fail "exit status after SIGTERM during a request"
ms=$((($(date +%s%N) - s) / 1000000))
say "stopped $ms ms after SIGTERM, during a request"
[ "$ms" -lt 3000 ] || fail "SIGTERM took $ms ms during a request"
echo PASS
