#!/usr/bin/env bash
# Backfill benchmark of pfr-shipper, this build (NEW) against an older one (OLD) in one run: one
# ring of 10 s chunks (pfr_testgen's realistic CPU profiles) re-sent with `pfr-shipper backfill`
# into ClickHouse (Coroot's tables; ClickHouse 26 as libchdb behind ch_front) and/or into the
# Coroot test server. OLD and NEW take turns on the same ring (RUNS pairs, the order swapped from
# pair to pair), each into a fresh server; the script prints per run and as medians, with the
# ratio NEW / OLD: chunks/s, peak shipper RSS, CPU per chunk of the shipper and of ClickHouse
# (ch_front: inserts and background merges, its MergeMutate threads), bytes sent per chunk; and
# checks that both stored the same rows.
#   SERVICES (50), INTERVALS (8640 = a day), STACKS (testgen's default), BENCH_DIR (work dir: the
#   generated ring and the OLD build are kept there and reused), SINKS ("clickhouse coroot"),
#   RUNS (3), CH_ARGS (more shipper options for the ClickHouse backfill, both builds; default:
#   256M / 8000-chunk batches, what a backfill over a fast link should use, docs/shipper.md; ""
#   for the defaults), NEW_ARGS (options for NEW only), OLD_REF (the git revision of OLD;
#   default: the one before the commit that made ClickHouse inserts streamed, or HEAD while that
#   change is not committed), OLD_SHIPPER (an OLD binary instead: no build).
# Rows: ClickHouse's order-free checksums of profiling_samples (every column), of the stacks
# (ServiceName, Hash, Stack, and each key's newest LastSeen) and of profiling_profiles FINAL.
set -euo pipefail
: "${SHIPPER:?}" "${CH_FRONT:?}" "${COROOT_SERVER:?}" "${RINGTOOL:?}" "${CHDB_LIB:?}" "${BENCH_DIR:?}"
SERVICES=${SERVICES:-50}
INTERVALS=${INTERVALS:-8640}
STACKS=${STACKS:-0}
SINKS=${SINKS:-clickhouse coroot}
RUNS=${RUNS:-3}
CH_ARGS=${CH_ARGS-"--batch-bytes 256M --batch-chunks 8000"}
NEW_ARGS=${NEW_ARGS:-}
[ -s "$CHDB_LIB" ] || { echo "SKIP: $CHDB_LIB missing (tests/shipper/setup-chdb.sh)"; exit 77; }
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time missing (peak RSS)"; exit 77; }
mkdir -p "$BENCH_DIR"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

# ---- OLD: built from git (git archive: the work tree and the repository stay as they are) ----
if [ -n "${OLD_SHIPPER:-}" ]; then
    OLD=$OLD_SHIPPER
else
    ref=${OLD_REF:-}
    if [ -z "$ref" ]; then
        # the first commit with streamed inserts (the file moved to shipper/sinks/ later)
        added=$(git -C "$REPO" log --format=%H --reverse -S 'table_read' -- shipper/sink_clickhouse.c |
            head -1)
        ref=${added:+$added~}
        ref=${ref:-HEAD}
    fi
    sha=$(git -C "$REPO" rev-parse --short "$ref")
    dir=$BENCH_DIR/old-$sha
    if [ ! -x "$dir/build/shipper/pfr-shipper" ]; then
        echo "building OLD ($ref = $sha) in $dir"
        rm -rf "$dir"
        mkdir -p "$dir/src"
        git -C "$REPO" archive "$sha" | tar -x -C "$dir/src"
        cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$dir/cmake.log" 2>&1 &&
            cmake --build "$dir/build" -j2 --target pfr-shipper >"$dir/build.log" 2>&1 ||
            { tail -20 "$dir/build.log"; exit 1; }
    fi
    OLD=$dir/build/shipper/pfr-shipper
fi
echo "OLD: $OLD"
echo "NEW: $SHIPPER ${NEW_ARGS}"

# ---- the ring ----
RING=$BENCH_DIR/ring-$SERVICES-$INTERVALS-$STACKS.db
if [ ! -e "$RING.ready" ]; then
    rm -rf "$RING" "$RING"-*
    echo "generating $((SERVICES * INTERVALS)) chunks ($SERVICES services x $INTERVALS intervals of 10 s) into $RING"
    s=$(date +%s)
    "$RINGTOOL" make --store "$RING" --services "$SERVICES" --intervals "$INTERVALS" \
        --stacks "$STACKS" --seed 1 --max-bytes 400000000000 >/dev/null
    echo "  generated in $(($(date +%s) - s)) s"
    touch "$RING.ready"
fi
CHUNKS=$("$RINGTOOL" stats --store "$RING" | awk '/^chunks/ {print $2}')
RINGBYTES=$(stat -c %s "$RING")
echo "ring: $CHUNKS chunks, $RINGBYTES bytes ($((RINGBYTES / CHUNKS)) per chunk stored)"

wait_port() {
    local i
    for i in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "server did not start" >&2
    exit 1
}
# CPU seconds of a process, and of its threads named like $2 (Linux /proc; ticks of 1/100 s).
proc_cpu() { awk '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / 100}' "/proc/$1/stat"; }
threads_cpu() {
    local t sum=0
    for t in /proc/"$1"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] || continue
        sum=$(awk -v s="$sum" '{sub(/^.*\) /, ""); printf "%.2f", s + ($12 + $13) / 100}' "$t/stat")
    done
    echo "$sum"
}
chq() { curl -sS --fail-with-body "http://127.0.0.1:$(cat "$BENCH_DIR/chport")/?database=coroot" --data-binary "$1"; }
# Order-free checksums of what ClickHouse holds (count and sum of cityHash64 per row).
ch_rows() {
    chq "SELECT count(), sum(cityHash64(ServiceName, Type, Start, End, Labels, StackHash, Value))
         FROM profiling_samples FORMAT TSV" | tr '\t' ':'
    chq "SELECT count(), sum(cityHash64(ServiceName, Hash, Stack)), sum(cityHash64(ServiceName, Hash, l))
         FROM (SELECT ServiceName, Hash, any(Stack) AS Stack, max(LastSeen) AS l FROM profiling_stacks
               GROUP BY ServiceName, Hash) FORMAT TSV" | tr '\t' ':'
    chq "SELECT count(), sum(cityHash64(*)) FROM profiling_profiles FINAL FORMAT TSV" | tr '\t' ':'
}

# One backfill: sink, version (old/new), run number. Appends a result line to $BENCH_DIR/results:
# "sink version run secs chunks/s bytes/chunk shipper_ms rss_mib ch_ms merges_ms rows".
run_one() {
    local sink=$1 ver=$2 run=$3 bin args=() log state
    bin=$([ "$ver" = old ] && echo "$OLD" || echo "$SHIPPER")
    [ "$ver" = new ] && [ -n "$NEW_ARGS" ] && read -r -a args <<<"$NEW_ARGS"
    log=$BENCH_DIR/backfill-$sink-$ver-$run.log
    state=$BENCH_DIR/state-$sink-$ver.db
    rm -f "$state" "$state"-* "$BENCH_DIR/shipper.time"
    local srv url extra=() c0=0 c1=0 merges=0 rows=-
    if [ "$sink" = clickhouse ]; then
        rm -rf "$BENCH_DIR/chdata" "$BENCH_DIR/chport"
        "$CH_FRONT" --lib "$CHDB_LIB" --data "$BENCH_DIR/chdata" --port-file "$BENCH_DIR/chport" \
            2>"$BENCH_DIR/front.err" &
        srv=$!
        PIDS+=("$srv")
        wait_port "$BENCH_DIR/chport"
        url="http://127.0.0.1:$(cat "$BENCH_DIR/chport")"
        read -r -a extra <<<"--database coroot --create-tables --ttl-days 0 $CH_ARGS"
        c0=$(proc_cpu "$srv")
    else
        rm -f "$BENCH_DIR/coport"
        "$COROOT_SERVER" --dir "$BENCH_DIR" --no-save 1 --port-file "$BENCH_DIR/coport" &
        srv=$!
        PIDS+=("$srv")
        wait_port "$BENCH_DIR/coport"
        url="http://127.0.0.1:$(cat "$BENCH_DIR/coport")"
    fi
    PFR_SHIPPER_API_KEY=bench /usr/bin/time -f "%U %S %M" -o "$BENCH_DIR/shipper.time" \
        "$bin" backfill --store "$RING" --state "$state" --sink "$sink" --url "$url" \
        "${extra[@]}" "${args[@]}" --from @0 --to "@$(($(date +%s) + 86400))" --deadline 0 \
        --progress 30s >"$log" 2>&1 || { tail -5 "$log"; exit 1; }
    if [ "$sink" = clickhouse ]; then
        c1=$(proc_cpu "$srv")
        merges=$(threads_cpu "$srv" MergeMutate)
        rows=$(ch_rows | paste -sd/)
    fi
    kill "$srv"
    wait "$srv" 2>/dev/null || true
    local line bytes secs u s m
    line=$(grep "done (" "$log" | tail -1)
    bytes=$(sed -n 's/.*done (\([0-9]*\) bytes in \([0-9.]*\) s).*/\1/p' <<<"$line")
    secs=$(sed -n 's/.*done (\([0-9]*\) bytes in \([0-9.]*\) s).*/\2/p' <<<"$line")
    read -r u s m <"$BENCH_DIR/shipper.time"
    awk -v sink="$sink" -v ver="$ver" -v run="$run" -v n="$CHUNKS" -v secs="$secs" -v b="$bytes" \
        -v u="$u" -v s="$s" -v m="$m" -v c0="$c0" -v c1="$c1" -v mg="$merges" -v rows="$rows" '
        BEGIN {
            printf "%s %s %d %.1f %.0f %d %.3f %.1f %.3f %.3f %s\n", sink, ver, run, secs, n / secs,
                b / n, (u + s) * 1000 / n, m / 1024, (c1 - c0) * 1000 / n, mg * 1000 / n, rows
        }' | tee -a "$BENCH_DIR/results"
}

: >"$BENCH_DIR/results"
echo "sink version run seconds chunks/s bytes/chunk shipper_ms/chunk shipper_peak_RSS_MiB" \
    "clickhouse_ms/chunk merges_ms/chunk rows"
for sink in $SINKS; do
    for run in $(seq 1 "$RUNS"); do
        if [ $((run % 2)) = 1 ]; then order="old new"; else order="new old"; fi
        for ver in $order; do run_one "$sink" "$ver" "$run"; done
    done
done

echo
echo "medians of $RUNS runs ($CHUNKS chunks; CH_ARGS: ${CH_ARGS:-none}; load now: $(cut -d' ' -f1-3 /proc/loadavg)):"
status=0
for sink in $SINKS; do
    awk -v sink="$sink" '
        function median(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == sink {
            k = $2; n[k]++
            for (f = 5; f <= 10; f++) v[k, f, n[k]] = $f
        }
        END {
            split("chunks/s bytes/chunk shipper_ms/chunk peak_RSS_MiB clickhouse_ms/chunk merges_ms/chunk", name, " ")
            printf "%-12s %-22s %12s %12s %8s\n", sink, "", "OLD", "NEW", "NEW/OLD"
            for (f = 5; f <= 10; f++) {
                if (sink != "clickhouse" && f >= 9) continue
                for (i = 1; i <= n["old"]; i++) a[i] = v["old", f, i]
                o = median(a, n["old"])
                for (i = 1; i <= n["new"]; i++) b[i] = v["new", f, i]
                w = median(b, n["new"])
                printf "%-12s %-22s %12.3f %12.3f %8.2f\n", "", name[f - 4], o, w, o ? w / o : 0
            }
        }' "$BENCH_DIR/results"
    if [ "$sink" = clickhouse ]; then
        kinds=$(awk '$1 == "clickhouse" {print $11}' "$BENCH_DIR/results" | sort -u | wc -l)
        if [ "$kinds" = 1 ]; then
            echo "  rows: OLD and NEW stored the same rows in every run ($(awk '$1 == "clickhouse" {print $11; exit}' "$BENCH_DIR/results"))"
        else
            echo "  rows DIFFER between runs:"
            awk '$1 == "clickhouse" {print "    " $2, $3, $11}' "$BENCH_DIR/results"
            status=1
        fi
        awk '$1 == "clickhouse" && $2 == "new" {s += $5; n++} END {if (n) printf "  a day (432,000 chunks) at NEW'"'"'s mean rate: %.0f s (target: under 300 s)\n", 432000 / (s / n)}' "$BENCH_DIR/results"
    fi
done
exit $status
