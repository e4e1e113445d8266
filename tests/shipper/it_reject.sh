#!/usr/bin/env bash
# Chunks a sink refuses for good (4xx) are set aside, counted and logged with the server's
# words, while the rest flows; ClickHouse's batch is narrowed down to the guilty chunks first.
# --retry-rejected sends them once the sink takes them.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 3 --intervals 4 --stacks 40 --seed 101
nbad=$("$RINGTOOL" chunks --store "$T/ring.db" | awk '$2 == "svc-1"' | wc -l)

start_coroot --reject-service svc-1
ship_co --once --batch-chunks 5 >"$T/co1.log" 2>&1 || fail "coroot shipper failed"
grep -q "set aside: HTTP 400: decoding profile: unexpected data (test rejection)" "$T/co1.log" ||
    fail "the server's message is not in the log"
[ "$(status_field coroot set_aside_chunks)" = "$nbad" ] || fail "coroot: $nbad chunks should be set aside"
co_fault "reject_service="
ship_co --once --retry-rejected >"$T/co2.log" 2>&1 || fail "coroot --retry-rejected failed"
[ "$(status_field coroot set_aside_chunks)" = 0 ] || fail "coroot: chunks still set aside"
check_bodies
check_coroot_set

start_front --reject-substring svc-1
ship_ch --once --batch-chunks 8 >"$T/ch1.log" 2>&1 || fail "clickhouse shipper failed"
grep -q "retrying in halves" "$T/ch1.log" || fail "the rejected batch was not narrowed down"
[ "$(status_field clickhouse set_aside_chunks)" = "$nbad" ] || fail "clickhouse: $(status_field clickhouse set_aside_chunks) set aside, want $nbad"
want=$("$RINGTOOL" chunks --store "$T/ring.db" | awk '$2 != "svc-1" {s += $5} END {printf "%.0f\n", s}')
[ "$(chq "SELECT sum(Value) FROM profiling_samples")" = "$want" ] || fail "clickhouse lacks the good chunks"
ch_fault "mode=none&reject="
ship_ch --once --retry-rejected >"$T/ch2.log" 2>&1 || fail "clickhouse --retry-rejected failed"
[ "$(status_field clickhouse set_aside_chunks)" = 0 ] || fail "clickhouse: chunks still set aside"
check_ch_exact
echo PASS
