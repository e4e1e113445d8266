#!/usr/bin/env bash
# service_prefix: both sinks ship every chunk's service name with the prefix in front, and
# nothing else changes (labels, values, stacks).
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 3 --stacks 20 --seed 41
start_coroot
start_front
ship_co --once --service-prefix site1- >"$T/co.log" 2>&1 || fail "coroot shipping failed: $(tail -3 "$T/co.log")"
ship_ch --once --service-prefix site1- >"$T/ch.log" 2>&1 || fail "clickhouse shipping failed: $(tail -3 "$T/ch.log")"

got=$(cat "$T"/bodies/*.txt | sed -n 's/.*service\.name=\([^&]*\).*/\1/p' | sort -u | tr '\n' ' ')
[ "$got" = "site1-svc-0 site1-svc-1 " ] || fail "Coroot got service.name $got"
grep -q "^service.name=site1-svc-1&container.id=/k8s/default/pod-1/app&host.name=host-a&pod=pod-1$" "$T"/bodies/*.txt || fail "a label changed"
got=$(chq "SELECT arrayStringConcat(groupUniqArray(ServiceName), ' ') FROM
             (SELECT ServiceName FROM profiling_samples UNION ALL SELECT ServiceName FROM profiling_stacks
              ORDER BY ServiceName)")
[ "$got" = "site1-svc-0 site1-svc-1" ] || [ "$got" = "site1-svc-1 site1-svc-0" ] ||
    fail "ClickHouse got ServiceName $got"
check_ch_exact
# Coroot's flame graph of a prefixed service is the ring's service's.
read -r first last < <(ring_span)
"$RINGTOOL" totals --store "$T/ring.db" --from "$first" --to "$last" --service svc-1 |
    sed 's/^svc-1/site1-svc-1/' | LC_ALL=C sort >"$T/want.tsv"
ch_flame site1-svc-1 ebpf:cpu:nanoseconds "$first" "$last" | LC_ALL=C sort >"$T/got.tsv"
cmp -s "$T/want.tsv" "$T/got.tsv" || fail "site1-svc-1's flame graph is not svc-1's"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
    --url "http://127.0.0.1:$CH_PORT" --database coroot --service-prefix site1- |
    grep -q "^  services as   site1-<service>$" || fail "status does not show the prefix"
echo PASS
