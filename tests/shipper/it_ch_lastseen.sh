#!/usr/bin/env bash
# A stack's LastSeen never moves back. profiling_stacks is a ReplacingMergeTree without a version
# column: after a merge the row inserted last wins. Ship the ring live, then backfill an older
# range holding the same stacks into the same database: without the shipper's LastSeen lookup the
# backfill's older rows win OPTIMIZE ... FINAL and Coroot's flame graph of the live range loses
# its stacks. With it, the backfill inserts no stack row at all (every stored one is newer).
source "$(dirname "$0")/lib.sh"
need_chdb
IV=10000000000
# The ring ends at noon UTC (today or yesterday): every LastSeen in one partition (a day).
now=$(date +%s)
ago=$((now % 86400 - 43200))
[ "$ago" -ge 0 ] || ago=$((ago + 86400))
mkring --services 2 --intervals 8 --stacks 30 --seed 23 --end-ago-s "$ago"
start_front
# stack_refresh 1s: a stack row's LastSeen is its chunk's end (plus 1 s), chunk by chunk.
ship_ch --once --stack-refresh 1s >"$T/live.log" 2>&1 || fail "live shipping failed: $(tail -3 "$T/live.log")"
check_ch_exact
read -r first last < <(ring_span)
live_from=$((first + 4 * IV))
compare_flame "$live_from" "$last"
stack_inserts() { grep "status=200" "$T/front.log" | grep -c "INSERT INTO profiling_stacks" || true; }
before=$(stack_inserts)
[ "$before" -gt 0 ] || fail "the live run inserted no stack rows"

# The older range again (as a backfill, or a second host holding the same stacks would).
"$SHIPPER" backfill --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
    --url "http://127.0.0.1:$CH_PORT" --api-key-file "$T/chkey" --user pfr --database coroot \
    --stack-refresh 1s --from "@$((first / 1000000000))" --to "@$(((first + 3 * IV) / 1000000000))" \
    --batch-chunks 2 --log-level debug >"$T/bf.log" 2>&1 || fail "backfill failed: $(tail -3 "$T/bf.log")"
grep -q "SELECT indexOf(\['svc-0', 'svc-1'\], ServiceName) AS s, Hash" "$T/front.log" ||
    fail "the shipper did not ask for the stacks' LastSeen"
after=$(stack_inserts)
[ "$after" = "$before" ] || fail "the backfill inserted $((after - before)) stack blocks older than the stored rows"

chq "OPTIMIZE TABLE profiling_stacks FINAL" || fail "OPTIMIZE failed"
old=$(chq "SELECT count() FROM profiling_stacks WHERE LastSeen <= fromUnixTimestamp64Nano(toInt64($live_from))
           AND (ServiceName, Hash) IN (SELECT ServiceName, StackHash FROM profiling_samples
                                       WHERE End > fromUnixTimestamp64Nano(toInt64($live_from)))")
[ "$old" = 0 ] || fail "$old stacks of the live range have a LastSeen before it after the merge"
compare_flame "$live_from" "$last"
echo PASS
