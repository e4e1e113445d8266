#!/usr/bin/env bash
# Pinned ranges first: the sink is down while the ring fills up (a link that is out); two ranges
# are pinned with `pfr pin` (one of one service, one of every service). When the sink comes up the
# shipper sends the pinned chunks before the rest of the backlog, then the rest in ring order,
# every chunk once (none lost), with a SIGKILL of the shipper in the middle: the state file keeps
# which chunks went ahead of the cursor, so none is sent again but those of the batch in flight
# at the kill (Coroot takes no idempotency token: at most one batch, 4 chunks, again).
source "$(dirname "$0")/lib.sh"
mkring --services 2 --intervals 40 --stacks 40 --seed 41 --end-ago-s 100
"$RINGTOOL" chunks --store "$T/ring.db" >"$T/all.txt"
n=$(wc -l <"$T/all.txt")
# pin intervals 20..24 of svc-1 and 30..31 of every service (by the chunks' own times)
t20=$(awk '$2 == "svc-1"' "$T/all.txt" | sed -n 21p | cut -f3)
t25=$(awk '$2 == "svc-1"' "$T/all.txt" | sed -n 26p | cut -f3)
t30=$(awk '$2 == "svc-0"' "$T/all.txt" | sed -n 31p | cut -f3)
t32=$(awk '$2 == "svc-0"' "$T/all.txt" | sed -n 33p | cut -f3)
"$PFR_QUERY" --store "$T/ring.db" pin --from "@${t20%000000000}" --to "@${t25%000000000}" \
    --service svc-1 --reason "incident A" >/dev/null || fail "pin A"
"$PFR_QUERY" --store "$T/ring.db" pin --from "@${t30%000000000}" --to "@${t32%000000000}" \
    --reason "incident B" >/dev/null || fail "pin B"
# the pinned chunks, in ring order: "service end"
awk -v a="$t20" -v b="$t25" -v c="$t30" -v d="$t32" \
    '($2 == "svc-1" && $3 < b && $4 > a) || ($3 < d && $4 > c) {print $2, $4}' "$T/all.txt" >"$T/pinned"
np=$(wc -l <"$T/pinned")
[ "$np" = 9 ] || fail "expected 9 pinned chunks, the ring gives $np"

start_coroot && stop_coroot # learn a free port, then leave it closed
ship_co_bg --batch-chunks 4 >"$T/ship.log" 2>&1 &
SP=$!
PIDS+=("$SP")
wait_until 20 grep -q "attempt 1 failed" "$T/ship.log" || fail "no failed attempt while the sink was down"
start_coroot
# a SIGKILL once some chunks arrived, then a new shipper on the same state
wait_until 60 sh -c "ls $T/bodies/*.pb.gz 2>/dev/null | wc -l | grep -v '^[0-3]$' >/dev/null" ||
    fail "nothing arrived: $(tail -3 "$T/ship.log")"
kill -KILL "$SP"
wait "$SP" 2>/dev/null || true
ship_co_bg --batch-chunks 4 >>"$T/ship.log" 2>&1 &
SP=$!
PIDS+=("$SP")
done_all() { [ "$(status_field coroot cursor)" = "$n" ]; }
wait_until 120 done_all || fail "not everything arrived: $(tail -5 "$T/ship.log")"
kill -TERM "$SP"
wait "$SP" || fail "the shipper did not exit 0 on SIGTERM"
grep -q "pinned chunks first" "$T/ship.log" || fail "no batch of pinned chunks logged"

check_bodies # each body is one chunk of the ring; $T/arrived in arrival order
awk '!seen[$0]++' "$T/arrived" >"$T/first"
dups=$(($(wc -l <"$T/arrived") - $(wc -l <"$T/first")))
[ "$dups" -le 4 ] || fail "$dups chunks arrived twice (one batch in flight at the kill: 4)"
awk '{print $2, $4}' "$T/all.txt" >"$T/want"
cmp -s <(sort "$T/want") <(sort "$T/first") || fail "Coroot did not get every chunk"
head -n "$np" "$T/first" >"$T/first_pinned"
cmp -s "$T/pinned" "$T/first_pinned" || {
    diff "$T/pinned" "$T/first_pinned" | head >&2
    fail "the pinned chunks did not arrive first, in ring order"
}
grep -vxF -f "$T/pinned" "$T/want" >"$T/rest_want"
tail -n +"$((np + 1))" "$T/first" >"$T/rest_got"
cmp -s "$T/rest_want" "$T/rest_got" || {
    diff "$T/rest_want" "$T/rest_got" | head >&2
    fail "the rest did not arrive in ring order"
}
say "$np pinned chunks first, then the other $((n - np)) in ring order ($dups sent again after the kill)"
echo PASS
