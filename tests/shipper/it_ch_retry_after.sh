#!/usr/bin/env bash
# ClickHouse answers 503 with Retry-After: 2: the shipper waits those 2 s (its own backoff would
# be 0.1 s), then stores everything once.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 4 --stacks 60 --seed 41
start_front --fault 503 --fault-count 1 --retry-after 2 --fault-match "INSERT INTO profiling_samples"
ship_ch --once --backoff-max 10s --basic-auth >"$T/ship.log" 2>&1 || fail "shipper failed"
t503=$(awk '/fault=503/ {print $1; exit}' "$T/front.log")
tnext=$(awk -v t="$t503" '$1 > t && /INSERT INTO profiling_samples/ && /status=200/ {print $1; exit}' "$T/front.log")
[ -n "$t503" ] && [ -n "$tnext" ] || fail "no 503 then retry in the front's log"
say "retried $((tnext - t503)) ms after the 503"
[ $((tnext - t503)) -ge 1900 ] || fail "Retry-After not honoured: retried after $((tnext - t503)) ms"
grep -q "(Retry-After)" "$T/ship.log" || fail "the log does not say Retry-After was used"
check_ch_exact
echo PASS
