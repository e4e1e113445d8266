#!/usr/bin/env bash
# Starts the real `pfr serve` on a free loopback port over a ring and runs the page's end-to-end
# test in headless Chromium: the "shift" ring and serve_e2e.mjs, or (SCENARIO names) the ring of
# Coroot-style and hostile service names and serve_names_e2e.mjs. Then stops the server with
# SIGTERM and checks it exits cleanly (under ASan that includes no leaks).
# Screenshots: ARTIFACTS/*.png.
#   serve_e2e.sh PFR MAKE_RING WORKDIR ARTIFACTS [shift|names]
set -euo pipefail
PFR=$1
MK=$2
W=$3
ART=$4
SCENARIO=${5:-shift}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"
mkdir -p "$W" "$ART"
export TZ=UTC
bash "$HERE/../npm-ready.sh" "$HERE"
T0=1714564800
case $SCENARIO in
shift) SCRIPT=serve_e2e.mjs CHUNKS=60 ;;
names) SCRIPT=serve_names_e2e.mjs CHUNKS=30 ;;
*)
    echo "unknown scenario $SCENARIO"
    exit 2
    ;;
esac
"$MK" "$W/ring.db" "$SCENARIO" --chunks $CHUNKS --start $T0
if [ "$SCENARIO" = shift ]; then
    # an idle service first by name (the page must open on the busiest, app), a pin of app's
    # minute T0+420..480 and an automatic one of every service (what a recorder trigger makes)
    "$MK" "$W/ring.db" shift --chunks 2 --start $((T0 + 300)) --service aaa-idle
    "$PFR" --store "$W/ring.db" pin --from @$((T0 + 420)) --to @$((T0 + 480)) --service app \
        --reason "e2e incident" >/dev/null
    python3 - "$W/ring.db" $T0 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
t0 = int(sys.argv[2])
db.execute("INSERT INTO pins(from_ns, to_ns, service, labels, reason, origin, created_ns)"
           " VALUES (?, ?, NULL, '', 'oom kill of pid 42', 'trigger:oom', 0)",
           ((t0 + 100) * 10**9, (t0 + 130) * 10**9))
db.commit()
PY
fi

"$PFR" --store "$W/ring.db" serve --listen 127.0.0.1:0 >"$W/serve.out" 2>"$W/serve.err" &
SERVER=$!
stop_server() {
    if kill -0 "$SERVER" 2>/dev/null; then
        kill -TERM "$SERVER" 2>/dev/null || true
    fi
}
trap stop_server EXIT

# The URL is printed once the socket listens (port 0: the kernel picked a free one).
URL=
for _ in $(seq 1 100); do
    URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$W/serve.out" || true)
    [ -n "$URL" ] && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$W/serve.err"; echo "pfr serve died"; exit 1; }
    sleep 0.1
done
[ -n "$URL" ] || { cat "$W/serve.err"; echo "pfr serve printed no URL in 10 s"; exit 1; }
echo "pfr serve at $URL"

rc=0
timeout 90 node "$HERE/$SCRIPT" --url "$URL" --out "$ART" || rc=$?

# A clean stop: SIGTERM, exit status 0 within 10 s.
kill -TERM "$SERVER"
for _ in $(seq 1 100); do
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$SERVER" 2>/dev/null; then
    echo "FAIL pfr serve did not stop within 10 s of SIGTERM"
    kill -KILL "$SERVER"
    rc=1
fi
src=0
wait "$SERVER" || src=$?
trap - EXIT
if [ "$src" -ne 0 ]; then
    echo "FAIL pfr serve exited with $src"
    cat "$W/serve.err"
    rc=1
else
    echo "ok   pfr serve stopped cleanly on SIGTERM"
fi
exit $rc
