#!/usr/bin/env bash
# A batch streamed as many small blocks (the smallest batch_memory: blocks of ~256 KB, one
# insert per table) arrives exactly, plain or gzip'd (one gzip stream over the blocks of an
# insert); gzip'd it puts under half the bytes on the wire.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 3 --intervals 30 --stacks 200 --seed 5
ship_one() { # label, then more shipper options
    local label=$1
    shift
    rm -rf "$T/chdata" "$T/state.db" "$T/state.db"-*
    start_front
    ship_ch --once --batch-memory 4M --batch-chunks 1000 "$@" >"$T/ship-$label.log" 2>&1 ||
        fail "$label: shipper failed: $(tail -3 "$T/ship-$label.log")"
    [ "$(grep -c "status=200 .*q=INSERT INTO profiling_samples" "$T/front.log")" = 1 ] ||
        fail "$label: not one insert of samples for the batch"
    check_ch_exact
    read -r a b < <(ring_span)
    compare_flame "$a" "$b"
    check_ch_hashes
    status_field clickhouse delivered_bytes >"$T/bytes-$label"
    stop_front
    : >"$T/front.log"
}
ship_one plain
ship_one gzip --compress
plain=$(cat "$T/bytes-plain")
gz=$(cat "$T/bytes-gzip")
say "sent $plain bytes plain, $gz gzip'd"
[ "$gz" -gt 0 ] && [ $((gz * 2)) -lt "$plain" ] || fail "gzip'd inserts are not smaller ($gz vs $plain)"
echo PASS
