#!/usr/bin/env bash
# Ship a recorded ring to the Coroot test server: one gzip'd pprof per chunk that go tool pprof
# reads, time_nanos = the chunk's end, service.name and labels in the query string, X-API-Key,
# oldest first. Profiles Coroot refuses (400) are set aside; --retry-rejected sends them later.
# (An unknown key, 404, sets nothing aside: it_coroot_wrong_key.sh.)
source "$(dirname "$0")/lib.sh"
mkring --services 2 --intervals 5 --stacks 100 --seed 5
start_coroot
# The test server keeps Coroot's contract.
co() { curl -s -o "$T/answer" -w "%{http_code}" "$@"; }
url="http://127.0.0.1:$CO_PORT/v1/profiles"
[ "$(co -H "X-API-Key: $CO_KEY" --data-binary @/dev/null "$url")" = 400 ] && grep -q "service.name is empty" "$T/answer" ||
    fail "no service.name: want 400 service.name is empty"
[ "$(co -H "X-API-Key: nope" --data-binary x "$url?service.name=a")" = 404 ] || fail "unknown key: want 404"
[ "$(co -H "X-API-Key: $CO_KEY" --data-binary "not a profile" "$url?service.name=a")" = 400 ] ||
    fail "a bad profile: want 400"
ship_co --once >"$T/ship.log" 2>&1 || fail "shipper --once failed: $(tail -3 "$T/ship.log")"
check_bodies
check_coroot_order 0
grep -q "q=service.name=svc-1&container.id=/k8s/default/pod-1/app&host.name=host-a&pod=pod-1" "$T/coroot.log" ||
    fail "labels are not in the query string"
grep -q "$CO_KEY" "$T/ship.log" && fail "the API key appears in the shipper's log"
[ "$(status_field coroot delivered_chunks)" = 10 ] || fail "status: delivered != 10"

# Coroot refuses every new profile (400): the chunks are set aside, counted, logged; --once says
# that nothing went (69).
mkring --services 2 --intervals 2 --stacks 100 --seed 6 --first-service 2
co_fault "mode=reject&match=service.name%3Dsvc-"
rc=0
ship_co --once >"$T/bad.log" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "--once with every chunk refused should exit 69, got $rc"
grep -q "set aside: HTTP 400: injected rejection" "$T/bad.log" || fail "the server's message is not logged"
[ "$(status_field coroot set_aside_chunks)" = 4 ] || fail "4 chunks should be set aside"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" | grep "set aside     4 chunks" >/dev/null ||
    fail "status text does not show the set-aside chunks"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 10 ] || fail "rejected chunks were stored"

# Coroot takes them again: --retry-rejected delivers them, once.
co_fault "mode=none"
ship_co --once --retry-rejected >"$T/retry.log" 2>&1 || fail "--retry-rejected failed"
[ "$(status_field coroot set_aside_chunks)" = 0 ] || fail "chunks still set aside"
check_bodies
check_coroot_order 0
echo PASS
