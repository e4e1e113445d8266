#!/usr/bin/env bash
# ClickHouse stores an insert and the answer is lost (twice): the shipper retries with the same
# insert_deduplication_token and ClickHouse keeps one copy: no doubled values.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 3 --intervals 5 --stacks 60 --seed 61
start_front --fault lost --fault-count 2 --fault-match "INSERT INTO profiling_samples"
ship_ch --once --batch-chunks 4 >"$T/ship.log" 2>&1 || fail "shipper failed"
[ "$(grep -c "fault=lost" "$T/front.log")" = 2 ] || fail "the lost answers did not happen"
for tok in $(awk '/fault=lost/ {for (i = 1; i <= NF; i++) if ($i ~ /^token=/) print substr($i, 7)}' "$T/front.log"); do
    [ "$(grep -c "status=200 .*token=$tok q=INSERT INTO profiling_samples" "$T/front.log")" -ge 2 ] ||
        fail "batch $tok was not stored and then sent again"
done
check_ch_exact
check_ch_order
read -r a b < <(ring_span)
compare_flame "$a" "$b"
echo PASS
