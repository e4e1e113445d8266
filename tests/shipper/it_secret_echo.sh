#!/usr/bin/env bash
# A sink that answers 401 and echoes the request's headers (the API key among them) in its body:
# the shipper shows the answer with the key redacted, and the key appears nowhere it writes —
# its log, the state file (database, -wal, -shm, read as bytes while the daemon runs and after),
# `status` as text and JSON. The state file is private (0600, also when an older shipper left it
# 0644), and a key file that others may read gets a warning at startup.
source "$(dirname "$0")/lib.sh"
mkring --services 2 --intervals 3 --stacks 60 --seed 41
start_coroot
co_fault "mode=echo401"
chmod 644 "$T/cokey"
leaks() { # files under $T holding the key, other than the key file
    grep -rlaF -- "$CO_KEY" "$T" | grep -v "/cokey$" || true
}

ship_co_bg >"$T/daemon.log" 2>&1 &
SP=$!
PIDS+=("$SP")
refused_twice() { [ "$(status_field coroot attempts)" -ge 2 ]; }
wait_until 30 refused_twice || fail "the shipper did not retry the refused sink: $(tail -3 "$T/daemon.log")"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" >"$T/status.txt"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" --json >"$T/status.json"
for f in state.db state.db-wal state.db-shm; do
    [ -e "$T/$f" ] || fail "$f is missing while the daemon runs"
    [ "$(stat -c %a "$T/$f")" = 600 ] || fail "$f has mode $(stat -c %a "$T/$f"), want 600"
done
[ -z "$(leaks)" ] || fail "the API key leaked into: $(leaks)"
kill -TERM "$SP"
wait "$SP" || fail "the daemon did not stop cleanly"

# The answer was shown, redacted: the test would pass vacuously if the echo never got through.
grep -qi "HTTP 401: unauthorized; your request was: .*X-API-Key: \*\*\*" "$T/daemon.log" ||
    fail "the echoed answer is not in the log as expected: $(grep -m2 401 "$T/daemon.log")"
grep -q "refused by the sink" "$T/status.txt" || fail "status does not show the refusal"
grep -qi "X-API-Key: \*\*\*" "$T/status.json" || fail "status --json lacks the redacted answer"
grep -q "sink coroot: the key file $T/cokey is readable by everyone (mode 0644): chmod 600 it" \
    "$T/daemon.log" || fail "no warning about the world-readable key file"
grep -q "set aside:" "$T/daemon.log" && fail "chunks were set aside on a 401"

# An older shipper's state file, 0644, is made private; --once fails (69) against the sink.
chmod 644 "$T/state.db"
chmod 600 "$T/cokey"
rc=0
ship_co --once --deadline 1s >"$T/once.log" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "--once against a sink refusing everything should exit 69, got $rc"
[ "$(stat -c %a "$T/state.db")" = 600 ] || fail "the state file was not made private"
grep -q "is readable by" "$T/once.log" && fail "a warning about a key file that only its owner reads"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" >>"$T/status.txt"
[ -z "$(leaks)" ] || fail "the API key leaked into: $(leaks)"

co_fault "mode=none"
ship_co --once >"$T/good.log" 2>&1 || fail "--once failed once the sink took profiles"
check_bodies
check_coroot_order 0
[ -z "$(leaks)" ] || fail "the API key leaked into: $(leaks)"
echo PASS
