#!/usr/bin/env bash
# Both sinks (from one config file) are down when the daemon starts: it backs off, uses next to
# no CPU, keeps the API keys out of its log; chunks keep arriving; then the sinks come up and
# everything arrives once, oldest first. SIGTERM ends it cleanly.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 5 --stacks 60 --seed 21 --end-ago-s 120
start_front && stop_front   # learn free ports, then leave them closed
start_coroot && stop_coroot
cat >"$T/shipper.ini" <<INI
[shipper]
store = $T/ring.db
state = $T/state.db
poll_interval = 100ms
batch_chunks = 3
batch_age = 0
backoff_initial = 100ms
backoff_max = 600ms
connect_timeout = 1s
timeout = 5s

[sink co]
type = coroot
url = http://127.0.0.1:$CO_PORT
api_key_file = $T/cokey

[sink ch]
type = clickhouse
url = http://127.0.0.1:$CH_PORT/
password_file = $T/chkey
user = pfr
database = coroot
create_tables = true
INI
"$SHIPPER" --config "$T/shipper.ini" --log-level debug >"$T/ship.log" 2>&1 &
SP=$!
PIDS+=("$SP")
sleep 1.5
rc=0
"$SHIPPER" --config "$T/shipper.ini" --once >"$T/second.log" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "another pfr-shipper is running" "$T/second.log" ||
    fail "a second daemon on the same state file was not refused (rc $rc)"
ticks() { awk '{print $14 + $15}' "/proc/$SP/stat"; }
t0=$(ticks)
sleep 3
t1=$(ticks)
hz=$(getconf CLK_TCK)
say "CPU while both sinks were down: $((t1 - t0)) ticks in 3 s (CLK_TCK $hz)"
[ $((t1 - t0)) -le $((hz / 2)) ] || fail "the shipper used $((t1 - t0)) ticks of CPU in 3 s while the sinks were down"
grep -q "sink co: attempt 1 failed" "$T/ship.log" || fail "no failed attempt logged for co"
grep -q "sink ch: attempt 1 failed" "$T/ship.log" || fail "no failed attempt logged for ch"
"$SHIPPER" status --config "$T/shipper.ini" | grep "retrying" >/dev/null || fail "status does not show the retries"

mkring --services 2 --intervals 2 --stacks 60 --seed 22 --end-ago-s 0 # more arrive meanwhile
start_front
start_coroot
n=$(ring_chunks)
done_all() { [ "$(status_field co cursor)" = "$n" ] && [ "$(status_field ch cursor)" = "$n" ]; }
wait_until 60 done_all || fail "not everything arrived after the sinks came up: $(tail -5 "$T/ship.log")"
kill -TERM "$SP"
wait "$SP" || fail "the shipper did not exit 0 on SIGTERM"
grep -q "stopping (signal 15)" "$T/ship.log" || fail "no clean stop logged"
grep -qF "$CO_KEY" "$T/ship.log" && fail "the Coroot API key appears in the log"
grep -q "chpw" "$T/ship.log" && fail "the ClickHouse password appears in the log"

check_ch_exact
check_ch_order
check_bodies
check_coroot_order 0
echo PASS
