#!/usr/bin/env bash
# A wrong API key: Coroot answers 404 (project not found) for every profile. That is about the
# sink, not the chunks: the shipper retries the same chunk with backoff, sets nothing aside,
# shows Coroot's answer in the log and in status, and --once exits 69 (a sink that delivered
# nothing and answered with errors). With the key fixed, every chunk arrives once, in order.
source "$(dirname "$0")/lib.sh"
mkring --services 2 --intervals 4 --stacks 60 --seed 31
n=$(ring_chunks)
start_coroot
(umask 077 && echo wrong-key >"$T/badkey")
rc=0
"$SHIPPER" --store "$T/ring.db" --state "$T/state.db" --sink coroot --url "http://127.0.0.1:$CO_PORT" \
    --api-key-file "$T/badkey" "${FAST[@]}" --once --deadline 2s >"$T/bad.log" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "--once with a wrong key should exit 69, got $rc: $(tail -3 "$T/bad.log")"
grep -q "attempt 1 failed, refused by the sink (nothing set aside): HTTP 404: project not found" "$T/bad.log" ||
    fail "the 404 is not logged as a failure of the sink: $(grep -m3 404 "$T/bad.log")"
grep -q "set aside:" "$T/bad.log" && fail "chunks were set aside on a 404"
grep -q "sink coroot: nothing delivered in this run; its last answer: refused by the sink" "$T/bad.log" ||
    fail "the run's failure is not said"
attempts=$(grep -c " 404 unknown-key " "$T/coroot.log")
[ "$attempts" -ge 2 ] || fail "the shipper did not retry ($attempts requests)"
# It kept asking with the oldest chunk instead of running through the backlog.
[ "$(grep " 404 unknown-key " "$T/coroot.log" | sed 's/.* q=//' | sort -u | wc -l)" = 1 ] ||
    fail "the 404s were for several chunks: the backlog was run through"
[ "$(status_field coroot set_aside_chunks)" = 0 ] || fail "status: chunks set aside"
[ "$(status_field coroot rejected_total)" = 0 ] || fail "status: chunks counted as rejected"
[ "$(status_field coroot cursor)" = 0 ] || fail "status: the cursor moved"
[ "$(status_field coroot delivered_chunks)" = 0 ] || fail "status: chunks delivered"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" >"$T/status.txt"
grep -q "last error .*refused by the sink (nothing set aside): HTTP 404: project not found (Coroot: unknown API key" "$T/status.txt" ||
    fail "status does not show Coroot's 404: $(cat "$T/status.txt")"
grep -q "retrying      [0-9]* failed attempts" "$T/status.txt" || fail "status does not show the retries"
grep -q "set aside     0 chunks" "$T/status.txt" || fail "status text shows chunks set aside"

# The key fixed: everything arrives, once, oldest first.
ship_co --once >"$T/good.log" 2>&1 || fail "--once with the right key failed: $(tail -3 "$T/good.log")"
[ "$(status_field coroot delivered_chunks)" = "$n" ] || fail "not every chunk was delivered"
check_bodies
check_coroot_order 0
echo PASS
