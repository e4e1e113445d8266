#!/usr/bin/env bash
# `pfr-shipper backfill --from --to --sink NAME` re-sends a past range to a sink (here a new
# ClickHouse, and Coroot again) without moving the live cursor, printing progress; running it
# again doubles nothing in ClickHouse.
source "$(dirname "$0")/lib.sh"
need_chdb
IV=10000000000
mkring --services 2 --intervals 8 --stacks 40 --seed 111
start_coroot
start_front
ship_co --once >"$T/live.log" 2>&1 || fail "live shipping failed"
live=$(status_field coroot cursor)
cat >"$T/b.ini" <<INI
[sink newch]
type = clickhouse
url = http://127.0.0.1:$CH_PORT
password_file = $T/chkey
user = pfr
database = coroot
create_tables = true
batch_chunks = 3
INI
read -r first last < <(ring_span)
from=$((first + 3 * IV))
to=$((first + 7 * IV))
bf() {
    "$SHIPPER" backfill --config "$T/b.ini" --store "$T/ring.db" --state "$T/state.db" \
        --sink newch --from "@$((from / 1000000000))" --to "@$((to / 1000000000))" \
        --progress 100ms --log-level info "$@"
}
bf >"$T/bf1.log" 2>&1 || fail "backfill failed: $(tail -3 "$T/bf1.log")"
grep -q "backfill to newch: 8/8 chunks (100.0%).*done" "$T/bf1.log" || fail "no final progress line: $(cat "$T/bf1.log")"
want=$("$RINGTOOL" totals --store "$T/ring.db" --from "$from" --to "$to" | awk -F'\t' '{s += $4} END {printf "%.0f\n", s}')
[ "$(chq "SELECT sum(Value) FROM profiling_samples")" = "$want" ] || fail "the backfill did not send exactly the range"
compare_flame "$from" "$to"
[ "$(status_field coroot cursor)" = "$live" ] || fail "the backfill moved the live cursor"
"$SHIPPER" status --config "$T/b.ini" --store "$T/ring.db" --state "$T/state.db" --json | grep '"name": "newch"' >/dev/null ||
    fail "status does not list the backfill's sink"
[ "$(status_field newch cursor)" = 0 ] || fail "the backfill moved newch's live cursor"

bf >"$T/bf2.log" 2>&1 || fail "second backfill failed"
[ "$(chq "SELECT sum(Value) FROM profiling_samples")" = "$want" ] || fail "a repeated backfill doubled values"

# To Coroot: the range again, at its own times.
n0=$(ls "$T"/bodies/*.pb.gz | wc -l)
PFR_SHIPPER_API_KEY=$CO_KEY "$SHIPPER" backfill --store "$T/ring.db" --state "$T/state.db" \
    --sink coroot --url "http://127.0.0.1:$CO_PORT" --from "@$((from / 1000000000))" \
    --to "@$((to / 1000000000))" >"$T/bf3.log" 2>&1 || fail "coroot backfill failed"
[ $(($(ls "$T"/bodies/*.pb.gz | wc -l) - n0)) = 8 ] || fail "coroot backfill did not send the 8 chunks of the range"
[ "$(status_field coroot cursor)" = "$live" ] || fail "the coroot backfill moved the live cursor"
check_bodies
echo PASS
