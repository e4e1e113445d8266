#!/usr/bin/env bash
# Coroot path under faults, one phase each: connection reset, 503 with Retry-After, a server
# slower than the timeout, answers lost after storing, and a lying 200 (an HTML page). Every
# chunk arrives, first arrivals oldest first; repeats only where an answer was lost or late
# (Coroot has no idempotency key: at least once).
source "$(dirname "$0")/lib.sh"
start_coroot
phase=0
run_phase() { # fault-query
    phase=$((phase + 1))
    mkring --services 2 --intervals 2 --stacks 40 --seed $((120 + phase)) --end-ago-s $((300 - 30 * phase))
    co_fault "$1"
    ship_co --once --timeout 1s >"$T/ship$phase.log" 2>&1 || fail "phase $phase ($1): shipper failed"
    grep -q "attempt 1 failed" "$T/ship$phase.log" || fail "phase $phase ($1): no failure seen"
}
run_phase "mode=reset&count=2"
run_phase "mode=503&count=2&retry_after=1"
run_phase "mode=slow&count=1&delay_ms=1600"
run_phase "mode=lost&count=2"
run_phase "mode=html&count=2"
grep -q "with an HTML page: not Coroot's answer" "$T/ship5.log" || fail "the lying answer was not caught"
co_fault "mode=none"
sleep 1.2 # the slow request's late store
check_bodies
check_coroot_order 3
echo PASS
