#!/usr/bin/env bash
# Java profiles in Coroot: the ring slice the recorder made of the ground-truth JVM (ctest
# java_profiles, tests/java/java_profiles.py: its service's Java and eBPF CPU chunks) shipped into
# the real (embedded) ClickHouse, then read with Coroot's own flame graph query for each of the
# five Java types: every type is there under the service, with the same labels as the JVM's
# eBPF CPU rows (container.id, host.name), the query's stacks equal `pfr flame --format folded`
# of the same slice, and they name the workload's methods (hotMethod, allocBig,
# contendedMethod).
source "$(dirname "$0")/lib.sh"
need_chdb
: "${JAVA_RING:?}"
[ -s "$JAVA_RING" ] && [ -s "$JAVA_RING.json" ] || fail "no Java ring slice $JAVA_RING (ctest java_profiles makes it)"
cp "$JAVA_RING" "$T/ring.db"
meta() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$JAVA_RING.json" "$1"; }
SVC=$(meta 'd["service"]')
CID=$(meta 'd["labels"]["container.id"]')
HOST=$(meta 'd["labels"]["host.name"]')
# the chunks' whole span, a second wider on each side (the Java chunks come an interval late, so
# the ring's order is not time order; no chunk may sit on a border `pfr` reads as a decimal)
read -r from to < <("$RINGTOOL" chunks --store "$T/ring.db" |
    awk 'NR == 1 || $3 < f {f = $3} $4 > l {l = $4} END {printf "%.0f %.0f\n", f - 1e9, l + 1e9}')
say "service $SVC, chunks $(ring_chunks), $from..$to"

start_front
mkdir -p "$T/home"
HOME=$T/home "$SHIPPER" backfill --store "$T/ring.db" --sink clickhouse --url "http://127.0.0.1:$CH_PORT" \
    --api-key-file "$T/chkey" --user pfr --database coroot --create-tables --log-level info \
    >"$T/ship.log" 2>&1 || fail "backfill of the Java slice failed: $(tail -3 "$T/ship.log")"
# (ringtool's totals take a chunk's first type; the Java chunks have two: compared per type below)
dup=$(chq "SELECT count() FROM (SELECT Type, Start, StackHash, count() AS c FROM profiling_samples
           GROUP BY Type, Start, StackHash HAVING c > 1)")
[ "$dup" = 0 ] || fail "$dup sample rows doubled in ClickHouse"

# the same labels on the JVM's eBPF CPU rows and on its Java rows: the application's instance
for type in ebpf:cpu:nanoseconds java:cpu:nanoseconds java:heap_alloc_objects:count \
    java:heap_alloc_space:bytes java:lock_contentions:count java:lock_delay:nanoseconds; do
    got=$(chq "SELECT DISTINCT Labels['container.id'], Labels['host.name'] FROM profiling_samples
               WHERE ServiceName = '$SVC' AND Type = '$type' FORMAT TabSeparatedRaw")
    [ "$got" = "$(printf '%s\t%s' "$CID" "$HOST")" ] ||
        fail "$type rows of $SVC: labels '$got', want container.id $CID, host.name $HOST"
done
say "every type under $SVC with container.id $CID, host.name $HOST"

# Coroot's flame graph of each Java type against pfr's of the same slice
ns_arg() { echo "@${1:0:${#1}-9}.${1:${#1}-9}"; }
for type in java:cpu:nanoseconds java:heap_alloc_objects:count java:heap_alloc_space:bytes \
    java:lock_contentions:count java:lock_delay:nanoseconds; do
    f=$T/${type//:/_}
    "$PFR_QUERY" --store "$T/ring.db" flame --service "$SVC" --type "$type" --from "$(ns_arg "$from")" \
        --to "$(ns_arg "$to")" --format folded 2>"$T/pfr.err" | LC_ALL=C sort >"$f.pfr" ||
        fail "pfr flame $type failed: $(cat "$T/pfr.err")"
    ch_flame "$SVC" "$type" "$from" "$to" | awk -F'\t' '{
        n = split($3, fr, " \\| "); out = "";
        for (i = n; i >= 1; i--) { f = fr[i]; sub(/ [^ ]*$/, "", f); out = out (out == "" ? "" : ";") f }
        sum[out] += $4 } END { for (k in sum) printf "%s %.0f\n", k, sum[k] }' | LC_ALL=C sort >"$f.ch"
    [ -s "$f.ch" ] || fail "Coroot's query finds no $type for $SVC"
    cmp -s "$f.pfr" "$f.ch" || {
        diff "$f.pfr" "$f.ch" | head -5 >&2
        fail "Coroot's flame graph of $type differs from pfr flame"
    }
    say "$type: Coroot's flame graph equals pfr's ($(wc -l <"$f.ch") stacks)"
done
grep -q "JfrWorkload.hotMethod" "$T/java_cpu_nanoseconds.ch" || fail "no hotMethod in Coroot's CPU flame graph"
grep -q "JfrWorkload.allocBig" "$T/java_heap_alloc_space_bytes.ch" || fail "no allocBig in Coroot's allocation flame graph"
for t in lock_contentions_count lock_delay_nanoseconds; do
    grep -q "JfrWorkload.contendedMethod" "$T/java_$t.ch" || fail "no contendedMethod in Coroot's $t"
done
# a frame as Coroot's agent writes it: "<class>.<method> <class>:<line>"
chq "SELECT arrayStringConcat(Stack, '|') FROM profiling_stacks WHERE ServiceName = '$SVC'
     FORMAT TabSeparatedRaw" | tr '|' '\n' >"$T/frames"
grep -q '^JfrWorkload\.hotMethod JfrWorkload:[1-9][0-9]*$' "$T/frames" ||
    fail "no frame 'JfrWorkload.hotMethod JfrWorkload:<line>' in profiling_stacks"
echo PASS
