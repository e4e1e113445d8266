#!/usr/bin/env bash
# Backfill benchmark of pfr-shipper: one ring of 10 s chunks (pfr_testgen's realistic CPU
# profiles) re-sent with `pfr-shipper backfill` into ClickHouse (Coroot's tables; ClickHouse 26
# as libchdb behind ch_front) and into the Coroot test server, one after the other in the same
# run. Prints chunks/s and bytes sent per chunk side by side, and the ClickHouse time against
# the target (a day of 50 services, 432,000 chunks, in under 5 minutes).
#   SERVICES (50), INTERVALS (8640 = a day), STACKS (testgen's default), BENCH_DIR (work dir;
#   the generated ring is kept there and reused), SINKS ("clickhouse coroot"), CH_ARGS (more
#   shipper options for the ClickHouse backfill; default: 256M / 8000-chunk batches, what a
#   backfill over a fast link should use, docs/shipper.md).
# For ClickHouse it also prints the CPU per chunk of the shipper and of ch_front (ClickHouse),
# the part of it spent by ClickHouse's background merges (its MergeMutate threads) and the
# bound that CPU puts on the rate with 2 cores.
set -euo pipefail
: "${SHIPPER:?}" "${CH_FRONT:?}" "${COROOT_SERVER:?}" "${RINGTOOL:?}" "${CHDB_LIB:?}" "${BENCH_DIR:?}"
SERVICES=${SERVICES:-50}
INTERVALS=${INTERVALS:-8640}
STACKS=${STACKS:-0}
SINKS=${SINKS:-clickhouse coroot}
CH_ARGS=${CH_ARGS-"--batch-bytes 256M --batch-chunks 8000"}
[ -s "$CHDB_LIB" ] || { echo "SKIP: $CHDB_LIB missing (tests/shipper/setup-chdb.sh)"; exit 77; }
mkdir -p "$BENCH_DIR"
RING=$BENCH_DIR/ring-$SERVICES-$INTERVALS-$STACKS.db
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

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
declare -A RATE BPC SECS
TIMER=()
[ -x /usr/bin/time ] && TIMER=(/usr/bin/time -f "%U %S %M" -o "$BENCH_DIR/shipper.time")
run_sink() { # name, then extra shipper args
    local name=$1 state=$BENCH_DIR/state-$1.db log=$BENCH_DIR/backfill-$1.log
    shift
    rm -f "$state" "$state"-* "$BENCH_DIR/shipper.time"
    "${TIMER[@]}" "$SHIPPER" backfill --store "$RING" --state "$state" --sink "$name" "$@" \
        --from @0 --to "@$(($(date +%s) + 86400))" --deadline 0 --progress 30s >"$log" 2>&1 ||
        { tail -5 "$log"; exit 1; }
    local line
    line=$(grep "done (" "$log" | tail -1)
    local bytes secs
    bytes=$(sed -n 's/.*done (\([0-9]*\) bytes in \([0-9.]*\) s).*/\1/p' <<<"$line")
    secs=$(sed -n 's/.*done (\([0-9]*\) bytes in \([0-9.]*\) s).*/\2/p' <<<"$line")
    SECS[$name]=$secs
    RATE[$name]=$(awk -v c="$CHUNKS" -v s="$secs" 'BEGIN {printf "%.0f", c / s}')
    BPC[$name]=$((bytes / CHUNKS))
    echo "$name: $CHUNKS chunks in $secs s: ${RATE[$name]} chunks/s, ${BPC[$name]} bytes/chunk sent"
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

for sink in $SINKS; do
    case $sink in
    clickhouse)
        rm -rf "$BENCH_DIR/chdata"
        "$CH_FRONT" --lib "$CHDB_LIB" --data "$BENCH_DIR/chdata" --port-file "$BENCH_DIR/chport" \
            2>"$BENCH_DIR/front.err" &
        PIDS+=($!)
        rm -f "$BENCH_DIR/chport"
        wait_port "$BENCH_DIR/chport"
        chpid=${PIDS[-1]}
        c0=$(proc_cpu "$chpid")
        run_sink clickhouse --url "http://127.0.0.1:$(cat "$BENCH_DIR/chport")" \
            --database bench --create-tables --ttl-days 0 $CH_ARGS
        c1=$(proc_cpu "$chpid")
        merges=$(threads_cpu "$chpid" MergeMutate)
        kill "$chpid"
        if [ -s "$BENCH_DIR/shipper.time" ]; then
            read -r u s m <"$BENCH_DIR/shipper.time"
            awk -v n="$CHUNKS" -v u="$u" -v s="$s" -v m="$m" -v c0="$c0" -v c1="$c1" -v mg="$merges" '
                BEGIN {
                    sh = (u + s) * 1000 / n; ch = (c1 - c0) * 1000 / n; me = mg * 1000 / n
                    printf "CPU per chunk: pfr-shipper %.3f ms (peak RSS %d MB), ClickHouse %.3f ms", sh, m / 1024, ch
                    printf " (%.3f ms of it in background merges)\n", me
                    printf "  2 cores, nothing else running: at most %.0f chunks/s", 2000 / (sh + ch)
                    printf " (merges still to come after the run are not counted)\n"
                }'
        fi
        ;;
    coroot)
        rm -f "$BENCH_DIR/coport"
        "$COROOT_SERVER" --dir "$BENCH_DIR" --no-save 1 --port-file "$BENCH_DIR/coport" &
        PIDS+=($!)
        wait_port "$BENCH_DIR/coport"
        PFR_SHIPPER_API_KEY=bench run_sink coroot --url "http://127.0.0.1:$(cat "$BENCH_DIR/coport")"
        kill "${PIDS[-1]}"
        ;;
    esac
done

echo
printf "%-12s %10s %10s %12s %16s\n" sink chunks seconds chunks/s "bytes/chunk"
for sink in $SINKS; do
    printf "%-12s %10s %10s %12s %16s\n" "$sink" "$CHUNKS" "${SECS[$sink]}" "${RATE[$sink]}" "${BPC[$sink]}"
done
if [ -n "${RATE[clickhouse]:-}" ]; then
    day=$(awk -v r="${RATE[clickhouse]}" 'BEGIN {printf "%.0f", 432000 / r}')
    echo "ClickHouse: a day of 50 services (432,000 chunks) at this rate: ${day} s (target: under 300 s)"
fi
