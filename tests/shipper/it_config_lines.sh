#!/usr/bin/env bash
# The shipper's config file is read whole-line: a long comment never sets a key, a 300-byte
# value arrives whole, a line past the limit and a key or section given twice are refused with
# the file and line.
. "$(dirname "$0")/lib.sh"
start_coroot
pad=$(head -c 380 /dev/zero | tr '\0' x)
# the key file at a path of over 300 bytes: the value must arrive whole for the key to be read
keydir=$T/$(head -c 150 /dev/zero | tr '\0' k)/$(head -c 150 /dev/zero | tr '\0' q)
mkdir -p "$keydir"
cp "$T/cokey" "$keydir/key"
chmod 0600 "$keydir/key"
printf '[sink co]\ntype = coroot\n# %surl = http://127.0.0.1:9/\nurl = http://127.0.0.1:%s\napi_key_file = %s\n' \
    "$pad" "$CO_PORT" "$keydir/key" >"$T/long.ini"
mkring --services 1 --intervals 3
"$SHIPPER" --config "$T/long.ini" --store "$T/ring.db" --state "$T/state.db" --once \
    --batch-age 0 --deadline 30s >"$T/long.log" 2>&1 ||
    fail "a long comment and a 300-byte value: $(tail -3 "$T/long.log")"
[ "$(grep -c " 200 " "$T/coroot.log")" -ge 3 ] || fail "the profiles did not arrive: $(tail -3 "$T/coroot.log")"
say "a long comment set nothing; a 300-byte value arrived whole"

printf '[sink co]\ntype = coroot\nurl = http://a/\nurl = http://b/\n' >"$T/dup.ini"
if "$SHIPPER" --config "$T/dup.ini" --store "$T/ring.db" --state "$T/s2.db" --once --deadline 5s >"$T/dup.log" 2>&1; then
    fail "a key given twice was accepted"
fi
grep -q "dup.ini:4: key 'url' in \[sink co\] given again (first at line 3)" "$T/dup.log" ||
    fail "duplicate key: $(cat "$T/dup.log")"
printf '[sink co]\ntype = coroot\n[sink co]\nurl = http://a/\n' >"$T/dup2.ini"
"$SHIPPER" --config "$T/dup2.ini" --store "$T/ring.db" --state "$T/s3.db" --once --deadline 5s >"$T/dup2.log" 2>&1 &&
    fail "a section given twice was accepted"
grep -q "dup2.ini:3: section \[sink co\] given again" "$T/dup2.log" ||
    fail "duplicate section: $(cat "$T/dup2.log")"
{ printf '[sink co]\ntype = coroot\nurl = http://a/'; head -c 5000 /dev/zero | tr '\0' z; echo; } >"$T/huge.ini"
"$SHIPPER" --config "$T/huge.ini" --store "$T/ring.db" --state "$T/s4.db" --once --deadline 5s >"$T/huge.log" 2>&1 &&
    fail "a 5000-byte line was accepted"
grep -q "huge.ini:3: line is too long" "$T/huge.log" || fail "long line: $(cat "$T/huge.log")"
say "duplicates and over-long lines refused with file and line"

# The settings tables (issue 25): the sink from the environment alone, durations with units in
# the environment, the file and flags, and a bad value refused with its flag and exit status 2.
mkring --services 1 --intervals 2
printf '[shipper]\npoll_interval = 250ms\nbackoff_max = 1m30s\n' >"$T/units.ini"
env PFR_SHIPPER_SINK=coroot PFR_SHIPPER_URL="http://127.0.0.1:$CO_PORT" \
    PFR_SHIPPER_API_KEY_FILE="$T/cokey" PFR_SHIPPER_LOG_LEVEL=debug \
    "$SHIPPER" --config "$T/units.ini" --store "$T/ring.db" --state "$T/s5.db" --once \
    --batch-age 0s --timeout 1m30s --connect-timeout 1500ms --deadline 0.5m >"$T/env.log" 2>&1 ||
    fail "a sink from the environment, durations with units: $(tail -3 "$T/env.log")"
grep -q "sink coroot: coroot http://127.0.0.1:$CO_PORT" "$T/env.log" ||
    fail "the sink from the environment: $(head -5 "$T/env.log")"
grep -q "debug" "$T/env.log" || fail "PFR_SHIPPER_LOG_LEVEL=debug was not applied"
set +e
"$SHIPPER" --config "$T/units.ini" --sink coroot --url http://a/ --api-key-file "$T/cokey" \
    --store "$T/ring.db" --state "$T/s6.db" --once --timeout 10parsecs >"$T/bad.log" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "a bad duration: exit $rc, not 2"
grep -q -- "--timeout" "$T/bad.log" || fail "a bad duration: the flag is not named: $(cat "$T/bad.log")"
say "the environment's sink, durations with units everywhere, a bad one refused by name"
