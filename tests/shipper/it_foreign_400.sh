#!/usr/bin/env bash
# A 400 that says nothing about the chunk sets nothing aside. nginx answers a plain HTTP request
# on its TLS port with "400 The plain HTTP request was sent to HTTPS port" (an HTML page): once,
# pointed with http:// at such a port, the shipper set aside 2,240 healthy chunks in 5 s. Both
# sinks run for seconds against the test servers' copy of that answer, then against a 400 in
# plain words that is the same for every request (a proxy; for ClickHouse, an answer without
# ClickHouse's exception code): nothing is set aside, the log and `status` name the reason;
# then the servers heal and every chunk arrives exactly once, in order. Chunks refused for their
# content, even all alike, are still set aside.
source "$(dirname "$0")/lib.sh"
need_chdb
mkring --services 4 --intervals 60 --stacks 20 --seed 141
N=$(ring_chunks)
say "$N chunks"
PAGE="HTTP 400: 400 The plain HTTP request was sent to HTTPS port (an HTML page, not the sink's answer"

# nothing_set_aside SINK: no chunk set aside now, none ever, and the failures counted
nothing_set_aside() {
    [ "$(status_field "$1" set_aside_chunks)" = 0 ] || fail "$1: $(status_field "$1" set_aside_chunks) chunks set aside"
    [ "$(status_field "$1" rejected_total)" = 0 ] || fail "$1: $(status_field "$1" rejected_total) chunks were set aside"
    [ "$(status_field "$1" delivered_chunks)" = 0 ] || fail "$1: something was delivered"
    [ "$(status_field "$1" sink_failures)" -ge 3 ] || fail "$1: sink_failures is $(status_field "$1" sink_failures)"
}
delivered_all() { [ "$(status_field "$1" delivered_chunks)" = "$N" ]; }
stop_shipper() {
    kill "$SP"
    wait "$SP" || fail "the shipper did not end cleanly"
}
# page_phase SINK LOG: 5 s of nginx's page: nothing set aside, and the log says why
page_phase() {
    sleep 5
    nothing_set_aside "$1"
    grep "refused by the sink (nothing set aside): $PAGE" "$2" >/dev/null ||
        fail "$1: the log does not say why: $(grep -m1 attempt "$2")"
    status_field "$1" last_error | grep "400 The plain HTTP request was sent to HTTPS port" >/dev/null ||
        fail "$1: status does not show the answer"
    lines=$(grep -c "attempt .* failed" "$2")
    [ "$lines" -le 5 ] || fail "$1: $lines log lines in 5 s of failures (attempts 1, 2, 4, 8, ... are logged)"
    say "$1, nginx's page: nothing set aside, $(status_field "$1" sink_failures) sink failures, $lines log lines"
}
# plain_phase SINK LOG WORDS: a plain 400, the same for every request, named in the log as WORDS
plain_phase() {
    wait_until 15 grep "$3" "$2" || fail "$1: the same plain 400 for every request was not recognized"
    sleep 2
    nothing_set_aside "$1"
    say "$1, the same plain 400 for every request: nothing set aside"
}

# ---- coroot ----
start_coroot
co_fault "mode=tls400"
ship_co_bg >"$T/co.log" 2>&1 &
SP=$!
PIDS+=("$SP")
page_phase coroot "$T/co.log"

co_fault "mode=plain400"
plain_phase coroot "$T/co.log" "HTTP 400: Bad Request (the same answer to a request without any chunk: about the sink"

co_fault "mode=none"
wait_until 60 delivered_all coroot || fail "coroot: $(status_field coroot delivered_chunks) of $N delivered"
stop_shipper
[ "$(status_field coroot set_aside_chunks)" = 0 ] || fail "coroot: chunks set aside at the end"
check_bodies
check_coroot_order 0

# ---- clickhouse: the tables are made, then every insert gets the answer ----
start_front
ch_fault "mode=tls400&match=INSERT"
ship_ch_bg >"$T/ch.log" 2>&1 &
SP=$!
PIDS+=("$SP")
page_phase clickhouse "$T/ch.log"

ch_fault "mode=plain400&match=INSERT"
plain_phase clickhouse "$T/ch.log" "no ClickHouse exception code: not ClickHouse's answer about the rows"

ch_fault "mode=none"
wait_until 60 delivered_all clickhouse || fail "clickhouse: $(status_field clickhouse delivered_chunks) of $N delivered"
stop_shipper
check_ch_exact
check_ch_order

# ---- chunks Coroot refuses for what they are, all alike and one after the other: set aside as
# before (a request without a chunk gets another answer), and the rest flows ----
rm -rf "$T"/ring.db* "$T"/state.db*
mkring --services 1 --intervals 6 --stacks 20 --seed 142
mkring --services 2 --intervals 2 --stacks 20 --seed 143 --first-service 1
co_fault "mode=none&reject_service=svc-0"
ship_co --once >"$T/alike.log" 2>&1 || fail "coroot, chunks refused alike: the shipper failed"
[ "$(status_field coroot set_aside_chunks)" = 6 ] || fail "coroot, chunks refused alike: $(status_field coroot set_aside_chunks) of 6 set aside"
[ "$(status_field coroot delivered_chunks)" = 4 ] || fail "coroot, chunks refused alike: the others did not flow"
[ "$(status_field coroot sink_failures)" = 0 ] || fail "coroot, chunks refused alike: taken for the sink's failures"
say "6 chunks in a row refused alike for their content: set aside, the other 4 delivered"
echo PASS
