# Helpers shared by the shipper's integration tests (sourced by it_*.sh). Each test gets its own
# directory under $WORK, starts the servers it needs (they die with the test) and runs the real
# pfr-shipper against them.
set -euo pipefail
: "${SHIPPER:?}" "${RINGTOOL:?}" "${COROOT_SERVER:?}" "${CH_FRONT:?}" "${WORK:?}"
TEST=$(basename "$0" .sh)
T=$WORK/$TEST
rm -rf "$T"
mkdir -p "$T"
export HOME=$T GOCACHE=$T/gocache
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

fail() {
    echo "FAIL ($TEST): $*" >&2
    exit 1
}
say() { echo "--- $*" >&2; }

need_chdb() {
    if [ ! -s "${CHDB_LIB:-}" ]; then
        echo "SKIP: ${CHDB_LIB:-libchdb.so} missing (run tests/shipper/setup-chdb.sh)"
        exit 77
    fi
}

wait_file() {
    local i
    for i in $(seq 1 150); do
        [ -s "$1" ] && return 0
        sleep 0.1
    done
    fail "timed out waiting for $1"
}

count_is() { [ "$(grep -c -- "$1" "$2")" = "$3" ]; }
# wait_until SECONDS CMD...: poll CMD until it succeeds.
wait_until() {
    local limit=$1 i
    shift
    for i in $(seq 1 $((limit * 10))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

CO_KEY=test-key-$RANDOM$RANDOM
(umask 077 && echo chpw >"$T/chkey" && echo "$CO_KEY" >"$T/cokey") # as an operator would

# ---- ClickHouse (libchdb behind ch_front) ----
CH_PORT=${CH_PORT:-0}
start_front() {
    rm -f "$T/chport"
    "$CH_FRONT" --lib "$CHDB_LIB" --data "$T/chdata" --port "$CH_PORT" --port-file "$T/chport" \
        --log "$T/front.log" --user pfr --password chpw "$@" 2>>"$T/front.err" &
    CH_PID=$!
    PIDS+=("$CH_PID")
    wait_file "$T/chport"
    CH_PORT=$(cat "$T/chport")
}
stop_front() {
    kill "$CH_PID" 2>/dev/null || true
    wait "$CH_PID" 2>/dev/null || true
}
chq() {
    curl -sS --fail-with-body -u pfr:chpw "http://127.0.0.1:$CH_PORT/?database=coroot" \
        --data-binary "$1"
}
ch_fault() { curl -sS --fail "http://127.0.0.1:$CH_PORT/__fault?$1" >/dev/null; }
# chq_db DB QUERY: a query in another database (e.g. before "coroot" exists).
chq_db() {
    curl -sS --fail-with-body -u pfr:chpw "http://127.0.0.1:$CH_PORT/?database=$1" \
        --data-binary "$2"
}

# ---- Coroot (coroot_server) ----
CO_PORT=${CO_PORT:-0}
start_coroot() {
    mkdir -p "$T/bodies"
    rm -f "$T/coport"
    "$COROOT_SERVER" --dir "$T/bodies" --api-key "$CO_KEY" --port "$CO_PORT" \
        --port-file "$T/coport" --log "$T/coroot.log" "$@" &
    CO_PID=$!
    PIDS+=("$CO_PID")
    wait_file "$T/coport"
    CO_PORT=$(cat "$T/coport")
}
stop_coroot() {
    kill "$CO_PID" 2>/dev/null || true
    wait "$CO_PID" 2>/dev/null || true
}
co_fault() { curl -sS --fail "http://127.0.0.1:$CO_PORT/__fault?$1" >/dev/null; }

# ---- the shipper ----
FAST=(--poll 100ms --batch-age 0 --backoff-initial 100ms --backoff-max 1s --connect-timeout 1s
    --timeout 5s --log-level debug)
ship_ch() {
    "$SHIPPER" --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
        --url "http://127.0.0.1:$CH_PORT" --api-key-file "$T/chkey" --user pfr \
        --database coroot --create-tables "${FAST[@]}" "$@"
}
ship_co() {
    "$SHIPPER" --store "$T/ring.db" --state "$T/state.db" --sink coroot \
        --url "http://127.0.0.1:$CO_PORT" --api-key-file "$T/cokey" "${FAST[@]}" "$@"
}
# The same, replacing the calling (background) shell: `ship_ch_bg ... &` leaves $! = the shipper.
ship_ch_bg() {
    exec "$SHIPPER" --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
        --url "http://127.0.0.1:$CH_PORT" --api-key-file "$T/chkey" --user pfr \
        --database coroot --create-tables "${FAST[@]}" "$@"
}
ship_co_bg() {
    exec "$SHIPPER" --store "$T/ring.db" --state "$T/state.db" --sink coroot \
        --url "http://127.0.0.1:$CO_PORT" --api-key-file "$T/cokey" "${FAST[@]}" "$@"
}
mkring() { "$RINGTOOL" make --store "$T/ring.db" "$@" >/dev/null; }
ring_total() { "$RINGTOOL" chunks --store "$T/ring.db" | awk '{s += $5} END {printf "%.0f\n", s}'; }
ring_chunks() { "$RINGTOOL" chunks --store "$T/ring.db" | wc -l; }
status_field() { # sink field: a number from `pfr-shipper status --json`
    "$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" --json |
        python3 -c "import json,sys; d=json.load(sys.stdin); print([s for s in d['sinks'] if s['name']=='$1'][0]['$2'])"
}

# ---- checks: ClickHouse ----
# Coroot's flame graph query (samples of a service and type overlapping [from, to), summed by
# StackHash, joined to stacks by Hash): "service\ttype\tstack\tvalue". CH_TABLES=_distributed
# reads through the Distributed tables, as Coroot does on a cluster.
ch_flame() {
    chq "WITH samples AS (SELECT StackHash AS hash, sum(Value) AS value FROM profiling_samples${CH_TABLES:-}
           WHERE ServiceName IN ('$1') AND Type = '$2'
             AND Start < fromUnixTimestamp64Nano(toInt64($4))
             AND End > fromUnixTimestamp64Nano(toInt64($3))
           GROUP BY StackHash),
         stacks AS (SELECT Hash AS hash, any(Stack) AS stack FROM profiling_stacks${CH_TABLES:-}
           WHERE ServiceName IN ('$1') AND LastSeen > fromUnixTimestamp64Nano(toInt64($3))
             AND Hash GLOBAL IN (SELECT hash FROM samples)
           GROUP BY Hash)
         SELECT '$1', '$2', arrayStringConcat(stack, ' | '), value
         FROM samples JOIN stacks USING (hash) FORMAT TabSeparatedRaw"
}
# The ring's totals over [from, to) against Coroot's flame graphs of the same range, per service.
compare_flame() {
    local from=$1 to=$2 s
    "$RINGTOOL" totals --store "$T/ring.db" --from "$from" --to "$to" | LC_ALL=C sort >"$T/ring.tsv"
    [ -s "$T/ring.tsv" ] || fail "the ring has nothing in $from..$to"
    : >"$T/ch.tsv"
    for s in $(cut -f1 "$T/ring.tsv" | sort -u); do
        ch_flame "$s" ebpf:cpu:nanoseconds "$from" "$to" >>"$T/ch.tsv"
    done
    LC_ALL=C sort -o "$T/ch.tsv" "$T/ch.tsv"
    if ! cmp -s "$T/ring.tsv" "$T/ch.tsv"; then
        diff "$T/ring.tsv" "$T/ch.tsv" | head -10 >&2
        fail "Coroot's flame graph from ClickHouse differs from the ring ($from..$to)"
    fi
    say "flame graphs equal over $from..$to: $(wc -l <"$T/ring.tsv") stacks"
}
# Everything the ring holds arrived exactly once: the sums match and no sample row is doubled.
check_ch_exact() {
    local want got dup
    want=$(ring_total)
    got=$(chq "SELECT sum(Value) FROM profiling_samples")
    [ "$want" = "$got" ] || fail "ClickHouse holds $got, the ring $want"
    dup=$(chq "SELECT count() FROM (SELECT ServiceName, Type, Start, StackHash, count() AS c
               FROM profiling_samples GROUP BY ServiceName, Type, Start, StackHash HAVING c > 1)")
    [ "$dup" = 0 ] || fail "$dup sample rows doubled in ClickHouse"
    say "ClickHouse holds the ring exactly: $got"
}
# Every stack row's Hash is FNV-1a 64 of its strings concatenated.
check_ch_hashes() {
    chq "SELECT Hash, hex(arrayStringConcat(Stack, '')) FROM profiling_stacks FORMAT TabSeparatedRaw" \
        | "$RINGTOOL" fnv >/dev/null || fail "a stack hash is not FNV-1a of its strings"
}

# ---- checks: Coroot ----
# Every saved body is a profile `go tool pprof -raw` reads, whose samples sum to its chunk's total
# and whose time is the chunk's end. Writes "service end" per body, in arrival order, to $T/arrived.
check_bodies() {
    local f n=0 sum svc t
    "$RINGTOOL" chunks --store "$T/ring.db" | awk '{print $2, $4, $5}' >"$T/chunks.txt"
    : >"$T/arrived"
    ls "$T"/bodies/*.pb.gz >/dev/null 2>&1 || fail "no body arrived"
    # go tool pprof mostly waits: read the bodies four at a time, each once.
    ls "$T"/bodies/*.pb.gz | xargs -P 4 -I{} sh -c '[ -s "$1.raw" ] && [ ! -e "$1.bad" ] ||
        "$0" tool pprof -raw "$1" >"$1.raw" 2>&1 || echo "$1" >>"$1.bad"' "$GO" {}
    for f in "$T"/bodies/*.pb.gz; do
        [ -e "$f.bad" ] && fail "go tool pprof -raw rejects $f: $(head -3 "$f.raw")"
        sum=$(awk '/^Samples:/ {s = 1; next} /^Locations/ {s = 0}
                   s && /^ *[0-9]+:/ {sub(":", "", $1); t += $1} END {printf "%.0f\n", t}' "$f.raw")
        svc=$(head -1 "${f%.pb.gz}.txt" | tr '&' '\n' | sed -n 's/^service\.name=//p')
        t=$(sed -n 2p "${f%.pb.gz}.txt" | cut -d' ' -f1)
        grep -q "^$svc $t $sum\$" "$T/chunks.txt" ||
            fail "$f ($svc at $t, total $sum) matches no chunk of the ring"
        grep -q "^Duration: 10s" "$f.raw" || fail "$f: duration is not the chunk's"
        echo "$svc $t" >>"$T/arrived"
        n=$((n + 1))
    done
    say "$n bodies read by go tool pprof, each the profile of one chunk"
}
# Each chunk arrived (at least once, exactly once unless allowed), first arrivals in ring order.
check_coroot_order() {
    local allow_dups=${1:-0}
    awk '{print $1, $2}' "$T/chunks.txt" >"$T/want"
    awk '!seen[$0]++' "$T/arrived" >"$T/first"
    cmp -s "$T/want" "$T/first" || {
        diff "$T/want" "$T/first" | head >&2
        fail "Coroot did not get every chunk once, oldest first"
    }
    local dups=$(($(wc -l <"$T/arrived") - $(wc -l <"$T/first")))
    [ "$dups" -le "$allow_dups" ] || fail "$dups chunks arrived twice (allowed $allow_dups)"
    say "Coroot got all $(wc -l <"$T/want") chunks in order ($dups repeated)"
}
# The same, without the order (after set-aside chunks were sent later).
check_coroot_set() {
    awk '{print $1, $2}' "$T/chunks.txt" | sort >"$T/want"
    sort -u "$T/arrived" >"$T/got"
    cmp -s "$T/want" "$T/got" || fail "Coroot did not get every chunk"
    [ "$(wc -l <"$T/arrived")" = "$(wc -l <"$T/want")" ] || fail "some chunks arrived twice"
}
# ClickHouse got its batches oldest first and each once: the chunk ranges of the sample inserts
# that stored data ("token=pfr-<inst>-<sink>-<after>-<max>-<n>") follow each other.
check_ch_order() {
    grep "status=200" "$T/front.log" | grep "INSERT INTO profiling_samples" |
        sed -n 's/.*token=pfr-[0-9a-f]*-[^ ]*-\([0-9]*\)-\([0-9]*\)-[0-9]* .*/\1 \2/p' |
        awk '!seen[$0]++' >"$T/ranges"
    awk 'NR > 1 && $1 != prev {bad = 1} {prev = $2} END {exit bad}' "$T/ranges" ||
        fail "ClickHouse batches are not in order: $(tr '\n' ' ' <"$T/ranges")"
    [ "$(tail -1 "$T/ranges" | cut -d' ' -f2)" = "$(ring_chunks)" ] || fail "the last batch is not the newest chunk"
}
# Interval boundaries of the ring: "first_start last_end".
ring_span() { "$RINGTOOL" chunks --store "$T/ring.db" | awk 'NR==1 {f=$3} {l=$4} END {print f, l}'; }
