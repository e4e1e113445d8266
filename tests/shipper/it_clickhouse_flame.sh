#!/usr/bin/env bash
# Ship a recorded ring into ClickHouse (Coroot's tables, created by the shipper), then read it
# the way Coroot draws a flame graph and compare with the ring's own totals per stack; and with
# `pfr flame --format folded` when the query tool is built.
source "$(dirname "$0")/lib.sh"
need_chdb
IV=10000000000
mkring --services 3 --intervals 6 --seed 11
start_front
ship_ch --once --batch-chunks 5 >"$T/ship.log" 2>&1 || fail "shipper --once failed: $(tail -3 "$T/ship.log")"
check_ch_exact
check_ch_hashes

read -r first last < <("$RINGTOOL" chunks --store "$T/ring.db" | awk 'NR==1 {f=$3} {l=$4} END {print f, l}')
compare_flame "$first" "$last"
compare_flame $((first + 2 * IV + IV / 2)) $((first + 4 * IV + 1)) # cutting through chunks

# Coroot's other tables: the materialized view fed profiling_profiles; inserts deduplicate.
n=$(chq "SELECT count(DISTINCT ServiceName, Type) FROM profiling_profiles")
[ "$n" = 3 ] || fail "profiling_profiles has $n (service, type) pairs, want 3"
chq "SELECT engine_full FROM system.tables WHERE database = 'coroot' AND name = 'profiling_samples'" |
    grep -q "non_replicated_deduplication_window = 10000" || fail "profiling_samples does not deduplicate inserts"
labels=$(chq "SELECT Labels['container.id'], Labels['pod'], Labels['host.name'] FROM profiling_samples WHERE ServiceName = 'svc-1' LIMIT 1")
[ "$labels" = "$(printf '/k8s/default/pod-1/app\tpod-1\thost-a')" ] || fail "labels: $labels"

# Shipping again sends nothing new and doubles nothing.
ship_ch --once >>"$T/ship.log" 2>&1 || fail "second --once failed"
check_ch_exact
[ "$(status_field clickhouse cursor)" = "$(ring_chunks)" ] || fail "cursor is not the last chunk"

if [ -n "${PFR_QUERY:-}" ] && [ -x "${PFR_QUERY}" ]; then
    for s in svc-0 svc-2; do
        "$PFR_QUERY" --store "$T/ring.db" flame --service "$s" --from "@$((first / IV * 10))" \
            --to "@$((last / IV * 10))" --format folded 2>"$T/pfr.err" | LC_ALL=C sort >"$T/pfr-$s.folded" ||
            fail "pfr flame failed: $(cat "$T/pfr.err")"
        ch_flame "$s" ebpf:cpu:nanoseconds "$first" "$last" | awk -F'\t' '{
            n = split($3, fr, " \\| "); out = "";
            for (i = n; i >= 1; i--) { f = fr[i]; sub(/ [^ ]*$/, "", f); out = out (out == "" ? "" : ";") f }
            sum[out] += $4 } END { for (k in sum) print k, sum[k] }' | LC_ALL=C sort >"$T/ch-$s.folded"
        cmp -s "$T/pfr-$s.folded" "$T/ch-$s.folded" || {
            diff "$T/pfr-$s.folded" "$T/ch-$s.folded" | head -5 >&2
            fail "pfr flame --format folded differs from Coroot's flame graph for $s"
        }
    done
    say "pfr flame --format folded equals Coroot's flame graph"
else
    say "pfr (query tool) not built: folded comparison skipped"
fi
echo PASS
