#!/usr/bin/env bash
# A ClickHouse backfill builds its next batch while the current one is in flight. When the batch
# in flight fails — an answer lost after the insert, a 503, a rejection that narrows the batch
# down — the next batch is dropped and built again, the retried batch keeps its token, and every
# chunk arrives exactly once with every sample's stack stored.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 3 --intervals 12 --stacks 60 --seed 83
start_front
bf() {
    "$SHIPPER" backfill --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
        --url "http://127.0.0.1:$CH_PORT" --api-key-file "$T/chkey" --user pfr \
        --database coroot --create-tables --batch-chunks 4 --backoff-initial 100ms \
        --backoff-max 1s --timeout 5s --from @0 --to "@$(($(date +%s) + 86400))" \
        --log-level debug "$@"
}
ch_fault "mode=lost&count=1&match=INSERT%20INTO%20profiling_samples"
bf >"$T/bf1.log" 2>&1 || fail "backfill failed: $(tail -3 "$T/bf1.log")"
ch_fault "mode=503&count=2&match=INSERT%20INTO%20profiling_samples&retry_after=0"
rm -f "$T/state.db"*
chq "TRUNCATE TABLE profiling_samples" && chq "TRUNCATE TABLE profiling_stacks" ||
    fail "cannot empty the tables"
bf >"$T/bf2.log" 2>&1 || fail "backfill failed: $(tail -3 "$T/bf2.log")"
check_ch_exact
ch_fault "mode=reject&count=1&match=INSERT%20INTO%20profiling_samples"
rm -f "$T/state.db"*
chq "TRUNCATE TABLE profiling_samples" && chq "TRUNCATE TABLE profiling_stacks" ||
    fail "cannot empty the tables"
bf >"$T/bf3.log" 2>&1 || fail "backfill failed: $(tail -3 "$T/bf3.log")"
[ "$(grep -c "fault=" "$T/front.log")" = 4 ] || fail "not every fault happened: $(grep fault= "$T/front.log")"
# The rejected batch was narrowed down and sent again in halves: nothing is set aside.
[ "$(status_field clickhouse set_aside_chunks)" = 0 ] || fail "chunks were set aside"
check_ch_exact
check_ch_hashes
missing=$(chq "SELECT count() FROM profiling_samples WHERE StackHash NOT IN
    (SELECT Hash FROM profiling_stacks)")
[ "$missing" = 0 ] || fail "$missing sample rows point at stacks ClickHouse does not have"
echo PASS
