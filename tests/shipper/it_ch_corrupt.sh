#!/usr/bin/env bash
# Corrupt chunks on the ClickHouse path (the ring's samples read path, pfr_store_scan_samples):
# a chunk whose payload fails its checksum and the chunks of a damaged dictionary layer are
# reported and skipped; everything else arrives exactly once; the shipper neither crashes nor
# stops.
source "$(dirname "$0")/lib.sh"
need_chdb
# The data spans an hour's start, where every stream starts a new chain (the case a layer of
# chunk 2's chain must be looked up in that chain, not in its stream).
now=$(date +%s)
RINGTOOL_NOW_S=$((now - now % 3600 - 3600 + 30)) mkring --services 3 --intervals 6 --stacks 60 --seed 77
total=$(ring_chunks)
# A chunk payload zeroed (checksum mismatch), and a later layer of svc-1's chain flipped.
sqlite3 "$T/ring.db" "UPDATE chunk_data SET data = zeroblob(length(data)) WHERE id = 4" ||
    fail "cannot damage chunk 4"
# The layer is taken from chunk 2's own chain (its base): the stream may have started a new
# chain since, whose chunks a layer of the old one does not touch.
layer=$(sqlite3 "$T/ring.db" "SELECT max(dict_id) FROM chunks WHERE
    base_id = (SELECT base_id FROM chunks WHERE id = 2)")
lost=$(sqlite3 "$T/ring.db" "SELECT count(*) FROM chunks WHERE dict_id >= $layer AND
    base_id = (SELECT base_id FROM chunks WHERE id = 2)")
sqlite3 "$T/ring.db" "UPDATE dicts SET data = zeroblob(length(data)) WHERE id = $layer" ||
    fail "cannot damage layer $layer"
bad=$(sqlite3 "$T/ring.db" "SELECT count(*) FROM chunks WHERE id = 4 OR (dict_id >= $layer AND
    base_id = (SELECT base_id FROM chunks WHERE id = 2))")
say "$total chunks, $bad damaged (layer $layer: $lost)"
want=$(sqlite3 "$T/ring.db" "SELECT id FROM chunks WHERE NOT (id = 4 OR (dict_id >= $layer AND
    base_id = (SELECT base_id FROM chunks WHERE id = 2)))" | while read -r id; do
    "$RINGTOOL" chunks --store "$T/ring.db" | awk -v id="$id" '$1 == id {print $5}'
done | awk '{s += $1} END {printf "%.0f\n", s}')
start_front
ship_ch --once --batch-chunks 5 >"$T/ship.log" 2>&1 || fail "shipper failed: $(tail -3 "$T/ship.log")"
[ "$(status_field clickhouse corrupt_chunks)" = "$bad" ] ||
    fail "corrupt_chunks = $(status_field clickhouse corrupt_chunks), want $bad"
[ "$(status_field clickhouse cursor)" = "$total" ] || fail "the cursor stopped before the end"
got=$(chq "SELECT sum(Value) FROM profiling_samples")
[ "$got" = "$want" ] || fail "ClickHouse holds $got, the undamaged chunks $want"
grep -q "corrupt chunks skipped" "$T/ship.log" || fail "the corrupt chunks were not reported"
check_ch_hashes
echo PASS
