#!/usr/bin/env bash
# `pfr pin`, `pfr pins`, `pfr unpin` and `pfr export --ring FILE --pin ID | --pins` on a ring made
# by query_make_ring (no recorder: pinning while it is stopped; tests/recorder's `pins` test pins
# beside the running recorder). Bad input gets a clear message and its exit code: an
# unparseable time (2), from after to (2), an unknown service (3), a 10 kB reason (2), no
# reason (2), an unknown pin (3).
#   pin_test.sh PFR MAKE_RING WORKDIR
set -uo pipefail
PFR=$1
MK=$2
W=$3
source "$(dirname "$0")/lib.sh"
# fails DESCRIPTION CODE PATTERN COMMAND...: exits CODE and says PATTERN on stderr
fails() {
    local what=$1 code=$2 pat=$3
    shift 3
    "$@" >"$W/out" 2>"$W/err"
    local rc=$?
    if [ "$rc" != "$code" ]; then
        bad "$what: exit $rc, not $code ($(head -c 300 "$W/err"))"
    elif grep -q -- "$pat" "$W/err"; then
        ok "$what: exit $code ($(head -1 "$W/err" | head -c 160))"
    else
        bad "$what: message lacks '$pat': $(head -c 400 "$W/err")"
    fi
}

# js FILE EXPR: the python expression EXPR is true of the JSON document j in FILE
js() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }

T0=1714564800
R=$W/ring.db
"$MK" "$R" testgen --chunks 30 --services 3 --start $T0 >/dev/null || {
    echo "FAIL make_ring"
    exit 1
}
P=("$PFR" --store "$R")

# ---- pin, pins ----
"${P[@]}" pin --from $T0 --to $((T0 + 120)) --service svc-1 --reason "INC-1: latency spike" \
    >"$W/pin1"
grep -q "^pin 1: " "$W/pin1" && ok "pin prints its id: $(cat "$W/pin1")" || bad "pin output: $(cat "$W/pin1")"
check "pin with a relative range (-10m .. now), every service" "${P[@]}" pin --from -10m --to now \
    --reason "the last ten minutes"
check "pin with a label" "${P[@]}" pin --from "@$T0" --to "@$((T0 + 60))" \
    --label host.name=host-0 --reason "by label"
"${P[@]}" pins --format json >"$W/pins.json"
check "pins --format json lists 3 pins" js "$W/pins.json" "len(j) == 3"
check "pin 1: range, service, reason, origin, bytes" js "$W/pins.json" "j[0]['id'] == 1 and
    j[0]['from_ns'] == ${T0}000000000 and j[0]['to_ns'] == $((T0 + 120))000000000 and
    j[0]['service'] == 'svc-1' and j[0]['reason'] == 'INC-1: latency spike' and
    j[0]['origin'].startswith('manual:') and not j[0]['automatic'] and j[0]['bytes'] > 0"
check "pin 2: every service (null)" js "$W/pins.json" "j[1]['service'] is None"
check "pin 3: its label" js "$W/pins.json" "j[2]['labels'] == {'host.name': 'host-0'}"
"${P[@]}" pins >"$W/pins.txt"
check "pins (text) shows the reason and who" grep -q "INC-1: latency spike" "$W/pins.txt"
check "pins (text) shows the origin" grep -q "manual:" "$W/pins.txt"
"${P[@]}" ls >"$W/ls.txt"
check "ls (text) says how many pins and what they keep" \
    grep -Eq "pins: 3, keeping [0-9.]+ KiB of their [0-9.]+ MiB budget" "$W/ls.txt"
"${P[@]}" ls --format json >"$W/ls.json"
check "ls --format json: the pins, their bytes and budget" js "$W/ls.json" \
    "j['ring']['pins'] == 3 and j['ring']['pinned_bytes'] > 0 and
    j['ring']['pinned_bytes'] <= j['ring']['pin_max_bytes'] and j['ring']['pins_released'] == 0"

# ---- export --pin ----
check "export --ring --pin 1" "${P[@]}" export --ring "$W/pin1.db" --pin 1
"$PFR" --store "$W/pin1.db" ls --format json >"$W/pin1.ls" 2>"$W/err"
check "the pin's file has svc-1 only" js "$W/pin1.ls" "[s['name'] for s in j['services']] == ['svc-1']"
check "the pin's file holds its 12 intervals" js "$W/pin1.ls" "j['services'][0]['chunks'] == 12"
"$PFR" --store "$W/pin1.db" pins --format json >"$W/pin1.pins"
check "the pin's file carries the pins over its range (1 and 3)" js "$W/pin1.pins" \
    "[p['id'] for p in j] == [1, 3] and j[0]['reason'] == 'INC-1: latency spike'"
check "export --ring --pins" "${P[@]}" export --ring "$W/pins.db" --pins
fails "export --pin of no pin" 3 "no pin 9" "${P[@]}" export --ring "$W/x.db" --pin 9
fails "export --pin with --service" 2 "the pin gives the range" \
    "${P[@]}" export --ring "$W/x.db" --pin 1 --service svc-0
check "nothing written for refused exports" test ! -e "$W/x.db"

# ---- unpin ----
check "unpin 2" "${P[@]}" unpin 2
fails "unpin 2 again" 3 "no pin 2" "${P[@]}" unpin 2
fails "unpin without an id" 2 "pin's number" "${P[@]}" unpin
fails "unpin abc" 2 "pin's number" "${P[@]}" unpin abc
"${P[@]}" pins --format json >"$W/pins.json"
check "two pins left" js "$W/pins.json" "len(j) == 2"

# ---- bad input ----
fails "unparseable --from" 2 "bad time" "${P[@]}" pin --from yesterdayish --to now --reason x
fails "from after to" 2 "after its end" "${P[@]}" pin --from $((T0 + 60)) --to $T0 --reason x
fails "unknown service" 3 'no service "nope"' "${P[@]}" pin --from $T0 --to $((T0 + 60)) \
    --service nope --reason x
fails "a 10 kB reason" 2 "10240 bytes, longer than the 1024" "${P[@]}" pin --from $T0 \
    --to $((T0 + 60)) --reason "$(head -c 10240 /dev/zero | tr '\0' x)"
fails "no reason" 2 "needs a reason" "${P[@]}" pin --from $T0 --to $((T0 + 60))
fails "--type" 2 "every profile type" "${P[@]}" pin --from $T0 --to $((T0 + 60)) --reason x \
    --type ebpf:cpu:nanoseconds
fails "pins --format yaml" 2 "text or json" "${P[@]}" pins --format yaml
"${P[@]}" pins --format json >"$W/pins.json"
check "still two pins after the refused ones" js "$W/pins.json" "len(j) == 2"

echo "pin_test: $passes passed, $fails failed"
[ "$fails" = 0 ]
