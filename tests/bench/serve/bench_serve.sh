#!/usr/bin/env bash
# First paint of the `pfr serve` page for 24 h of one service (8,640 chunks of 10 s from
# tests/gen, in a real ring): navigation start to the chart and the flame graph drawn, in headless
# Chromium, median of RUNS page loads. Peers measured in the same run: the API calls the page
# makes (timeline + flame, raw HTTP), and `pfr flame --format html` writing the same view to a
# file (the command-line way to the same picture).
#   bench_serve.sh PFR MAKE_RING WORKDIR      env: RUNS (default 7), CHUNKS (default 8640)
set -euo pipefail
PFR=$1
MK=$2
W=$3
RUNS=${RUNS:-7}
CHUNKS=${CHUNKS:-8640}
HERE=$(cd "$(dirname "$0")" && pwd)
SERVE_TESTS=$(cd "$HERE/../../serve" && pwd)
mkdir -p "$W"
export TZ=UTC
bash "$SERVE_TESTS/../npm-ready.sh" "$SERVE_TESTS"
T0=1714564800
T1=$((T0 + CHUNKS * 10))
RING="$W/day.db"
if [ ! -f "$RING.done-$CHUNKS" ]; then
    rm -f "$RING" "$RING"-*
    echo "making $CHUNKS chunks of 10 s..."
    "$MK" "$RING" testgen --chunks "$CHUNKS" --start $T0 --seed 42
    touch "$RING.done-$CHUNKS"
fi

# Peer: pfr flame --format html of the same range (the page's flame graph: 0.01 % min width).
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
peer=()
peer_cpu=()
TIMEFORMAT='%3R %3U %3S'
for _ in $(seq 1 "$RUNS"); do
    { time "$PFR" --store "$RING" flame --service svc-0 --from $T0 --to $T1 --format html \
        -o "$W/flame.html" 2>/dev/null; } 2>"$W/time.txt"
    peer+=($(awk '{printf "%d", $1 * 1000}' "$W/time.txt"))
    peer_cpu+=($(awk '{printf "%d", ($2 + $3) * 1000}' "$W/time.txt"))
done
PEER_MS=$(printf '%s\n' "${peer[@]}" | median)
PEER_CPU_MS=$(printf '%s\n' "${peer_cpu[@]}" | median)

"$PFR" --store "$RING" serve --listen 127.0.0.1:0 >"$W/serve.out" 2>"$W/serve.err" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
URL=
for _ in $(seq 1 100); do
    URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$W/serve.out" || true)
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || { cat "$W/serve.err"; echo "pfr serve printed no URL"; exit 1; }

node "$HERE/bench_serve.mjs" --url "$URL" --pid "$SERVER" --from $T0 --to $T1 --runs "$RUNS" \
    --modules "$SERVE_TESTS" --peer-ms "$PEER_MS" --peer-cpu-ms "$PEER_CPU_MS" --chunks "$CHUNKS"
