#!/usr/bin/env bash
# ClickHouse answers about the sink, not the rows — an unknown database, a wrong password
# (AUTHENTICATION_FAILED, 516, with X-ClickHouse-Exception-Code), a password rotated while the
# daemon inserts — are retried with backoff: nothing is set aside, status shows ClickHouse's
# words, --once exits 69; once fixed, every chunk arrives exactly once, in order. A server that
# echoes the request's headers in its error (X-ClickHouse-Key, or Authorization: Basic) does not
# get the password into the log, the state file or status.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 2 --intervals 4 --stacks 60 --seed 51
start_front
ship_ch_as() { # state-file key-file more args...: the clickhouse sink without --create-tables
    local state=$1 key=$2
    shift 2
    "$SHIPPER" --store "$T/ring.db" --state "$T/$state" --sink clickhouse \
        --url "http://127.0.0.1:$CH_PORT" --api-key-file "$key" --user pfr "${FAST[@]}" "$@"
}
status_of() { # state-file field
    "$SHIPPER" status --store "$T/ring.db" --state "$T/$1" --json |
        python3 -c "import json,sys; print(json.load(sys.stdin)['sinks'][0]['$2'])"
}
no_secret() { # string files...: none of the files holds it
    local f
    for f in "${@:2}"; do
        [ -e "$f" ] || continue
        grep -qaF -- "$1" "$f" && fail "$f holds a secret ($1)"
    done
    return 0
}

say "unknown database"
rc=0
ship_ch_as db.db "$T/chkey" --database coroot_p1 --once --deadline 2s >"$T/db.log" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "--once into an unknown database should exit 69, got $rc: $(tail -3 "$T/db.log")"
grep -q "refused by the sink (nothing set aside): .*HTTP 404: Code: 81\..*UNKNOWN_DATABASE" "$T/db.log" ||
    fail "ClickHouse's UNKNOWN_DATABASE is not logged: $(grep -m2 failed "$T/db.log")"
[ "$(status_of db.db set_aside_chunks)" = 0 ] || fail "chunks set aside for an unknown database"
status_of db.db last_error | grep "UNKNOWN_DATABASE" >/dev/null || fail "status does not show UNKNOWN_DATABASE"
ship_ch_as db.db "$T/chkey" --database coroot_p1 --create-tables --once >"$T/db2.log" 2>&1 ||
    fail "--create-tables into the new database failed: $(tail -3 "$T/db2.log")"
got=$(curl -sS --fail-with-body -u pfr:chpw "http://127.0.0.1:$CH_PORT/?database=coroot_p1" \
    --data-binary "SELECT sum(Value) FROM profiling_samples")
[ "$got" = "$(ring_total)" ] || fail "database coroot_p1 holds $got, the ring $(ring_total)"

say "wrong password from the start"
(umask 077 && echo not-the-password >"$T/badpw")
rc=0
ship_ch_as state.db "$T/badpw" --database coroot --create-tables --once --deadline 2s \
    >"$T/badpw.log" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "--once with a wrong password should exit 69, got $rc: $(tail -3 "$T/badpw.log")"
grep -q "refused by the sink (nothing set aside): .*HTTP 403: Code: 516\. DB::Exception: Authentication failed" \
    "$T/badpw.log" || fail "AUTHENTICATION_FAILED is not logged: $(grep -m2 failed "$T/badpw.log")"
[ "$(status_field clickhouse set_aside_chunks)" = 0 ] || fail "chunks set aside on a wrong password"
status_field clickhouse last_error | grep "AUTHENTICATION_FAILED" >/dev/null || fail "status does not show 516"

say "password rotated on the server while the daemon inserts"
ship_ch_bg >"$T/daemon.log" 2>&1 &
SP=$!
PIDS+=("$SP")
n=$(ring_chunks)
caught_up() { [ "$(status_field clickhouse cursor)" = "$1" ]; }
wait_until 60 caught_up "$n" || fail "the daemon did not deliver the ring: $(tail -3 "$T/daemon.log")"
ch_fault "password=rotated"
mkring --services 2 --intervals 3 --stacks 60 --seed 52 --end-ago-s 0
n2=$(ring_chunks)
refused() { status_field clickhouse last_error | grep AUTHENTICATION_FAILED >/dev/null &&
    [ "$(status_field clickhouse attempts)" -ge 2 ]; }
wait_until 30 refused || fail "the daemon did not retry the refused inserts: $(tail -3 "$T/daemon.log")"
grep -q "attempt 1 failed, refused by the sink (nothing set aside): .*HTTP 403: Code: 516" "$T/daemon.log" ||
    fail "the refused insert is not logged"
[ "$(status_field clickhouse set_aside_chunks)" = 0 ] || fail "chunks set aside on a rotated password"
[ "$(status_field clickhouse cursor)" = "$n" ] || fail "the cursor moved past refused chunks"
ch_fault "password=chpw"
wait_until 60 caught_up "$n2" || fail "the daemon did not deliver after the password came back"
kill -TERM "$SP"
wait "$SP" || fail "the daemon did not stop cleanly"
check_ch_exact
check_ch_order

say "a server echoing the credentials"
mkring --services 2 --intervals 2 --stacks 60 --seed 53 --end-ago-s 0
ch_fault "mode=echo"
for auth in "" --basic-auth; do
    rc=0
    ship_ch --once --deadline 1s $auth >"$T/echo$auth.log" 2>&1 || rc=$?
    [ "$rc" = 69 ] || fail "--once against an echoing sink ($auth) should exit 69, got $rc"
    "$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" >"$T/echo-status$auth.txt"
    "$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" --json >>"$T/echo-status$auth.txt"
done
grep -qi "X-ClickHouse-Key: \*\*\*" "$T/echo.log" || fail "the echoed key header is not shown redacted"
grep -qi "Authorization: Basic \*\*\*" "$T/echo--basic-auth.log" ||
    fail "the echoed Authorization header is not shown redacted: $(grep -m1 failed "$T/echo--basic-auth.log")"
basic=$(printf 'pfr:chpw' | base64)
for s in chpw "$basic" not-the-password; do
    no_secret "$s" "$T"/{db,db2,badpw,daemon,last}.log "$T"/echo*.log "$T"/echo-status*.txt \
        "$T"/state.db* "$T"/db.db*
done
[ "$(status_field clickhouse set_aside_chunks)" = 0 ] || fail "chunks set aside on an echoed 516"
ch_fault "mode=none"
ship_ch --once >"$T/last.log" 2>&1 || fail "--once failed after the echo: $(tail -3 "$T/last.log")"
check_ch_exact
check_ch_order
echo PASS
