#!/usr/bin/env bash
# Integration test of the pfr binary on real rings: help, exit codes, time errors, ls, folded
# totals against the generator's own chunk sums, pprof export read back by `go tool pprof -raw`,
# diff of a shifting workload, timeline, output files, reading while a writer appends.
#   cli_test.sh PFR MAKE_RING WORKDIR [GO]
set -uo pipefail
PFR=$1
MK=$2
W=$3
GO=${4:-/usr/lib/go-1.19/bin/go}
rm -rf "$W"
mkdir -p "$W"
export HOME=$W TZ=UTC
passes=0
fails=0
ok() { echo "ok   $*"; passes=$((passes + 1)); }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
expect_exit() { # expect_exit CODE COMMAND...: runs it, stdout in $W/out, stderr in $W/err
    local want=$1
    shift
    "$@" >"$W/out" 2>"$W/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then
        ok "exit $want: ${*#"$PFR"}"
    else
        bad "exit $got, want $want: $* -- $(head -c 600 "$W/err")"
    fi
}

T0=1714564800
R=$W/ring.db
"$MK" "$R" testgen --chunks 60 --services 2 --start $T0 --totals "$W/totals.txt" || {
    echo "FAIL make_ring"
    exit 1
}
"$MK" "$W/shift.db" shift --chunks 60 --start $T0 || exit 1

# ---- help and usage ----
for c in ls flame timeline diff export; do
    expect_exit 0 "$PFR" "$c" --help
    check "$c --help prints usage" grep -q "Usage: pfr \[--store PATH\] $c" "$W/out"
    expect_exit 0 "$PFR" help "$c"
done
expect_exit 0 "$PFR" --help
check "--help lists exit codes" grep -q "Exit codes" "$W/out"
expect_exit 0 "$PFR" --version
expect_exit 2 "$PFR"
expect_exit 2 "$PFR" nosuch
expect_exit 2 "$PFR" --store "$R" flame --bogus
expect_exit 2 "$PFR" --store "$R" ls --from -1h
expect_exit 2 "$PFR" --store "$R" flame --format gif
expect_exit 2 "$PFR" --store "$R" flame --label novalue
expect_exit 2 "$PFR" --store "$R" flame --from yesterdayish
check "bad time shows the accepted forms" grep -q "RFC 3339" "$W/err"
check "bad time names the input" grep -q "yesterdayish" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame --from -1h --to -2h
expect_exit 1 "$PFR" --store "$W/none.db" ls
check "missing ring is named" grep -q "none.db" "$W/err"

# ---- ls ----
expect_exit 0 "$PFR" --store "$R" ls
check "ls lists both services" grep -q "service svc-1" "$W/out"
check "ls lists the type" grep -q "ebpf:cpu:nanoseconds" "$W/out"
check "ls shows coverage" grep -q "covers    2024-05-01 12:00:00 +0000 to 2024-05-01 12:10:00 +0000" "$W/out"
expect_exit 0 env PFR_STORE="$R" "$PFR" ls --format json
check "ls json parses" python3 -c "import json,sys; d=json.load(open('$W/out')); assert len(d['services'])==2 and d['services'][0]['chunks']==60"

# ---- no data ----
expect_exit 3 "$PFR" --store "$R" flame --service svc-0 --from $((T0 - 3600)) --to $((T0 - 60)) --format folded
check "empty range says no data" grep -q "no data" "$W/err"
check "no output for an empty range" test ! -s "$W/out"
expect_exit 3 "$PFR" --store "$R" flame --service nope --from $T0 --to $((T0 + 600))
check "unknown service lists services" grep -q "svc-0" "$W/err"
expect_exit 3 "$PFR" --store "$R" flame --type go:heap_inuse_space:bytes --from $T0 --to $((T0 + 600))
expect_exit 3 "$PFR" --store "$R" export --service svc-0 --from $((T0 - 3600)) --to $((T0 - 60)) -o "$W/none.pb.gz"
check "no file for an empty export" test ! -e "$W/none.pb.gz"

# ---- folded totals equal the chunk values in range ----
for r in "0 600" "25 95" "100 110" "-50 5" "595 700"; do
    set -- $r
    from=$((T0 + $1))
    to=$((T0 + $2))
    want=$(awk -v f=$((from))000000000 -v t=$((to))000000000 '$1=="svc-0" && $2 < t && $3 > f {s+=$4} END {printf "%.0f", s}' "$W/totals.txt")
    expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $from --to $to --format folded
    got=$(awk '{s+=$NF} END {printf "%.0f", s}' "$W/out")
    check "folded total [$1 s, $2 s) = chunk sum $want (got $got)" test "$got" = "$want"
done
check "folded is root first" grep -qE '^[^ ;]+;' "$W/out"

# ---- export read back by go tool pprof ----
from=$((T0 + 100))
to=$((T0 + 400))
want=$(awk -v f=${from}000000000 -v t=${to}000000000 '$1=="svc-0" && $2 < t && $3 > f {s+=$4} END {printf "%.0f", s}' "$W/totals.txt")
expect_exit 0 "$PFR" --store "$R" export --service svc-0 --from $from --to $to -o "$W/x.pb.gz"
check "export is gzip" bash -c "head -c2 '$W/x.pb.gz' | od -An -tx1 | grep -q '1f 8b'"
if [ -x "$GO" ]; then
    "$GO" tool pprof -raw "$W/x.pb.gz" >"$W/raw.txt" 2>"$W/raw.err"
    got=$(python3 - "$W/raw.txt" <<'EOF'
import re, sys
total, on = 0, False
for line in open(sys.argv[1]):
    if line.startswith('Samples:'):
        on = True
        continue
    if line.startswith('Locations'):
        break
    m = re.match(r'^\s+(\d+):', line)
    if on and m:
        total += int(m.group(1))
print(total)
EOF
)
    check "go tool pprof -raw total $got = chunk sum $want" test "$got" = "$want"
    "$GO" tool pprof -top "$W/x.pb.gz" >"$W/top.txt" 2>&1
    check "go tool pprof -top reads it" grep -q "flat%" "$W/top.txt"
    expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $from --to $to --format pprof -o "$W/y.pprof"
    check "flame --format pprof = export" cmp -s "$W/x.pb.gz" "$W/y.pprof"
else
    bad "go toolchain missing at $GO"
fi
expect_exit 2 script -qec "$PFR --store $R export --service svc-0 --from $from --to $to" /dev/null

# ---- other formats and -o ----
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --format json -o "$W/f.json"
python3 -c "
import json; d=json.load(open('$W/f.json'))
want=sum(int(l.split()[3]) for l in open('$W/totals.txt') if l.startswith('svc-0 '))
assert d['kind']=='flame' and d['service']=='svc-0' and d['root']['value']==want, (d['root']['value'], want)
" && ok "json total = chunk sum" || bad "json total = chunk sum"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/f.svg"
check "-o .svg writes svg" grep -q "<svg" "$W/f.svg"
check "svg prints the range and filters" grep -q "2024-05-01 12:00:00 +0000 to 2024-05-01 12:10:00 +0000 (10m) · service svc-0, type ebpf:cpu:nanoseconds" "$W/f.svg"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/f.html"
check "-o .html writes html" grep -q "<!DOCTYPE html>" "$W/f.html"
check "html has no external URL" bash -c "! grep -Eq '(src|href)=\"?(https?:)?//' '$W/f.html'"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --format top --limit 5
check "top has 5 rows" test "$(grep -cE '[0-9]%  ' "$W/out")" = 5
expect_exit 0 "$PFR" --store "$R" flame --from $T0 --to $((T0 + 600)) --format folded
check "all services: one frame per service" bash -c "cut -d';' -f1 '$W/out' | sort -u | tr '\n' ' ' | grep -qx 'svc-0 svc-1 '"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --label comm=nosuchprocess --format folded
check "sample label filter with no match gives nothing" test ! -s "$W/out"

# ---- diff ----
S=$W/shift.db
expect_exit 0 "$PFR" --store "$S" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) --format top
check "diff top leads with the hot functions" bash -c "grep -A2 'SELF BASE' '$W/out' | tail -2 | grep -q hot_after"
check "hot_after grew by 500%" grep -q "+500.0%.*hot_after" "$W/out"
check "hot_before shrank" grep -q -- "-83.3%.*hot_before" "$W/out"
check "steady work unchanged" bash -c "! grep -q steady_work '$W/out'"
expect_exit 0 "$PFR" --store "$S" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) --base-from $((T0 + 300)) --format top
check "a range against itself: no differences" grep -q "no differences" "$W/out"
expect_exit 0 "$PFR" --store "$S" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) --format json -o "$W/d.json"
python3 - "$W/d.json" <<'EOF' && ok "diff json: hot_after red, hot_before green, steady grey" || bad "diff json colours"
import json, sys
d = json.load(open(sys.argv[1]))
assert d['kind'] == 'diff' and d['base_from_ns'] < d['from_ns']
seen = {}
stack = [d['root']]
while stack:
    n = stack.pop()
    seen[n['name']] = n
    stack += n['children']
rgb = lambda c: tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))
r, g, b = rgb(seen['hot_after']['color']); assert r > g + 60 and r > b + 60
r, g, b = rgb(seen['hot_before']['color']); assert g > r and g > b
r, g, b = rgb(seen['steady_work']['color']); assert r == g == b
assert seen['steady_work']['change'] == 0
EOF
expect_exit 3 "$PFR" --store "$S" diff --service app --from $T0 --to $((T0 + 60))
check "diff with an empty baseline says which side" grep -q "baseline: no data" "$W/err"

# ---- timeline ----
expect_exit 0 "$PFR" --store "$S" timeline --service app --from $T0 --to $((T0 + 600)) --step 1m
check "timeline: 10 intervals of 33 s" test "$(grep -c ' 33 s █' "$W/out")" = 10
expect_exit 0 "$PFR" --store "$S" timeline --service app --from $T0 --to $((T0 + 600)) --format json
check "timeline json sums to the total" python3 -c "
import json; d=json.load(open('$W/out')); assert abs(sum(p['value'] for p in d['points']) - 330e9) < 1"
expect_exit 2 "$PFR" --store "$S" timeline --service app --step 0s

# ---- read-only while a writer appends ----
"$MK" "$W/live.db" testgen --chunks 150 --start $T0 >/dev/null 2>&1 &
writer=$!
reads=0
readfail=0
while kill -0 $writer 2>/dev/null && [ $reads -lt 40 ]; do
    "$PFR" --store "$W/live.db" flame --from $T0 --to $((T0 + 4000)) --format folded >/dev/null 2>"$W/live.err"
    rc=$?
    # 0, or 3 before the first chunk lands (or 1 before the file exists)
    if [ $rc -ne 0 ] && [ $rc -ne 3 ] && [ $rc -ne 1 ]; then readfail=$((readfail + 1)); cat "$W/live.err"; fi
    reads=$((reads + 1))
done
wait $writer
check "writer finished while being read" test $? -eq 0
check "$reads reads during writes, none failed" test $readfail -eq 0
expect_exit 0 "$PFR" --store "$W/live.db" ls
check "all chunks there after the writer" grep -q "chunks    150" "$W/out"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
