#!/usr/bin/env bash
# Integration test of the pfr binary on real rings: help, exit codes, time errors, ls, folded
# totals against the generator's own chunk sums, pprof export read back by `go tool pprof -raw`,
# diff of a shifting workload, timeline, output files, service names as Coroot gives them
# ('/', '.', '-', ':') and hostile ones, reading while a writer appends.
#   cli_test.sh PFR MAKE_RING WORKDIR [GO]
set -uo pipefail
PFR=$1
MK=$2
W=$3
GO=${4:-/usr/lib/go-1.19/bin/go}
source "$(dirname "$0")/lib.sh"
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
check "a bad --format names the formats of flame" grep -q 'expected folded, pprof, svg, html, json or top' "$W/err"
expect_exit 2 "$PFR" --store "$R" diff --format folded
check "... and of diff" grep -q 'expected svg, html, json or top' "$W/err"
expect_exit 2 "$PFR" --store "$R" ls --format top
check "... and of ls" grep -q 'expected json or text' "$W/err"
expect_exit 0 "$PFR" flame --help
check "flame --help lists the formats and their extensions" grep -q 'pprof .*\*\.pb\.gz \*\.pprof' "$W/out"
expect_exit 2 "$PFR" --store "$R" flame --label novalue
expect_exit 2 "$PFR" --store "$R" flame --from yesterdayish
check "bad time shows the accepted forms" grep -q "RFC 3339" "$W/err"
check "bad time names the input" grep -q "yesterdayish" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame --from -1h --to -2h
# the options as tables: bounds, a flag of another command, operands, no config file
expect_exit 2 "$PFR" --store "$R" flame --width 5
check "--width below its bound says the bound" grep -q -- "--width.*10" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame --min-width 100
check "--min-width 100 is refused as a percentage" grep -q "percentage below 100" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame --min-width 1x
expect_exit 2 "$PFR" --store "$R" flame $(for i in $(seq 33); do printf -- '--label k%d=v ' "$i"; done)
check "at most 32 labels" grep -q "at most 32 labels" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame --step 1m
check "a flag of another command is unknown" grep -q "unknown option '--step'" "$W/err"
expect_exit 2 "$PFR" --store "$R" flame extra
check "an operand is refused" grep -q 'unexpected argument "extra"' "$W/err"
expect_exit 2 "$PFR" --store "$R" ls --config /dev/null
expect_exit 2 "$PFR" --store "$R" serve --timeout 7x
expect_exit 2 "$PFR" --store "$R" serve --max-queries 65
expect_exit 2 "$PFR" flame --store "$R"
expect_exit 0 env PFR_STORE="$R" "$PFR" ls --values 1
expect_exit 0 "$PFR" --store="$R" flame --format=folded --from=$T0 --to=$((T0 + 60)) --label comm=nosuch --label pid=1 -o "$W/two-labels.folded"
check "two --label flags both filter" test ! -s "$W/two-labels.folded"
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
check "export is gzip" bash -c "head -c2 '$W/x.pb.gz' | od -An -tx1 | grep '1f 8b' >/dev/null"
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
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/f.pb.gz"
check "-o .pb.gz writes gzip'd pprof" bash -c "head -c2 '$W/f.pb.gz' | od -An -tx1 | grep '1f 8b' >/dev/null"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) -o "$W/f.folded"
check "-o .folded writes folded stacks" grep -qE '^main\.main;.* [0-9]+$' "$W/f.folded"
expect_exit 0 "$PFR" --store "$W/shift.db" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) -o "$W/d.htm"
check "diff -o .htm writes html" grep -q "<!DOCTYPE html>" "$W/d.htm"
# -o never destroys what it names: a device that fails (like /dev/full), a symlink to it, and a
# symlink to a file whose rewrite fails all survive; a good write keeps a symlink a symlink.
rm -f "$W/full" "$W/to-full" "$W/to-svg"
mknod "$W/full" c 1 7
ln -s "$W/full" "$W/to-full"
expect_exit 1 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --format svg -o "$W/full"
check "-o to a failing device reports it" grep -q "No space left" "$W/err"
check "-o to a failing device leaves the node" test -c "$W/full"
expect_exit 1 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --format svg -o "$W/to-full"
check "-o to a symlink to it leaves the link" test -L "$W/to-full"
check "... and the node" test -c "$W/full"
cp "$W/f.svg" "$W/keep.svg"
ln -s "$W/keep.svg" "$W/to-svg"
expect_exit 3 "$PFR" --store "$R" flame --service nosuch --from $T0 --to $((T0 + 600)) -o "$W/to-svg"
check "a failed query leaves the symlink" test -L "$W/to-svg"
check "... and its file" cmp -s "$W/f.svg" "$W/keep.svg"
expect_exit 0 "$PFR" --store "$R" flame --service svc-1 --from $T0 --to $((T0 + 600)) -o "$W/to-svg"
check "a good write through a symlink keeps the link" test -L "$W/to-svg"
check "... and rewrites its file" grep -q "svc-1" "$W/keep.svg"
check "no temporary file left" bash -c "! ls -A '$W' | grep '^\.pfr-out-' >/dev/null"
rm -f "$W/full" "$W/to-full" "$W/to-svg" "$W/keep.svg"
check "html has no external URL" bash -c "! grep -Eq '(src|href)=\"?(https?:)?//' '$W/f.html'"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --format top --limit 5
check "top has 5 rows" test "$(grep -cE '[0-9]%  ' "$W/out")" = 5
expect_exit 0 "$PFR" --store "$R" flame --from $T0 --to $((T0 + 600)) --format folded
check "all services: one frame per service" bash -c "cut -d';' -f1 '$W/out' | sort -u | tr '\n' ' ' | grep -x 'svc-0 svc-1 ' >/dev/null"
expect_exit 0 "$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 600)) --label comm=nosuchprocess --format folded
check "sample label filter with no match gives nothing" test ! -s "$W/out"

# ---- diff ----
S=$W/shift.db
expect_exit 0 "$PFR" --store "$S" diff --service app --from $((T0 + 300)) --to $((T0 + 600)) --format top
check "diff top leads with the hot functions" bash -c "grep -A2 'SELF BASE' '$W/out' | tail -2 | grep hot_after >/dev/null"
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
# one duration syntax (pfr_units.h): units, compound terms, a bare number as seconds
expect_exit 0 "$PFR" --store "$S" timeline --service app --from $T0 --to $((T0 + 600)) --step 1m0s
check "--step 1m0s = --step 1m" test "$(grep -c ' 33 s █' "$W/out")" = 10
expect_exit 0 "$PFR" --store "$S" timeline --service app --from $T0 --to $((T0 + 600)) --step 60
check "--step 60 = --step 1m" test "$(grep -c ' 33 s █' "$W/out")" = 10
expect_exit 0 "$PFR" --store "$S" timeline --service app --from $T0 --to $((T0 + 600)) --step 0.5m --format json
check "--step 0.5m gives 20 intervals" python3 -c "
import json; d=json.load(open('$W/out')); assert len(d['points']) == 20, len(d['points'])"
expect_exit 2 "$PFR" --store "$S" timeline --service app --step 10x
check "a bad --step names the flag and the syntax" grep -q -- "--step.*1m30s" "$W/err"
expect_exit 3 "$PFR" --store "$S" timeline --service app --from "now-1m30s" --to now
check "a relative time takes the same syntax (parsed: no data, not a usage error)" grep -q "no data from" "$W/err"

# ---- service names as Coroot gives them, and hostile ones (FX_NAMES in ring_fixture.h) ----
N=$W/names.db
"$MK" "$N" names --chunks 30 --start $T0 || exit 1
NR="--from $T0 --to $((T0 + 300))"
expect_exit 0 "$PFR" --store "$N" ls
for s in /system.slice/nginx.service /docker/web /k8s/default/api /k8s/prod/db-0/postgres \
    /k8s-cronjob/ns/backup nginx; do
    check "ls names $s as it is" grep -qxF "service $s" "$W/out"
done
check "ls quotes a name with spaces" grep -qxF 'service "/weird/a+b %2F c?d=e&f#g:8080"' "$W/out"
check "ls escapes a newline and ESC" grep -qxF 'service "semi;colon\nnew line\x1b[31mred\x1b[0m"' "$W/out"
check "ls escapes bytes that are not UTF-8" grep -qxF 'service "bytes\xff\xfe"' "$W/out"
check "ls: one line per service, no control byte" bash -c "[ \$(grep -c '^service ' '$W/out') = 11 ] && ! grep -qP '[\x00-\x08\x0b-\x1f\x7f]' '$W/out'"
check "ls lists both container.id of the Deployment" grep -qF "container.id: /k8s/default/api-7d4f9c6b8d-q9zzm/app /k8s/default/api-7d4f9c6b8d-x2b5k/app" "$W/out"
expect_exit 0 "$PFR" --store "$N" ls --format json
python3 - "$W/out" <<'EOF2' && ok "ls json: every name exact" || bad "ls json: every name exact"
import json, sys
d = json.load(open(sys.argv[1]))
names = [s['name'] for s in d['services']]
want = ['/docker/web', '/k8s-cronjob/ns/backup', '/k8s/default/api', '/k8s/long/' + 'x' * 2000,
        '/k8s/prod/db-0/postgres', '/system.slice/nginx.service', '/weird/a+b %2F c?d=e&f#g:8080',
        '<!--<script><img src=x onerror=alert(1)>"\'&amp;</script>', r'bytes\xff\xfe', 'nginx',
        'semi;colon\nnew line\x1b[31mred\x1b[0m']
assert names == want, names
api = d['services'][2]['labels']['container.id']
assert api == ['/k8s/default/api-7d4f9c6b8d-q9zzm/app', '/k8s/default/api-7d4f9c6b8d-x2b5k/app'], api
EOF2
# each service by its exact name: its own stacks, its own total (30 chunks)
while IFS='|' read -r s leaf per; do
    expect_exit 0 "$PFR" --store "$N" flame --service "$s" $NR --format folded
    check "flame --service $s: main;$leaf, total $((30 * per)) s" test "$(cat "$W/out")" = "main;$leaf $((30 * per))000000000"
    expect_exit 0 "$PFR" --store "$N" timeline --service "$s" $NR --format json
    check "timeline json names $s" python3 -c "import json,sys; assert json.load(open('$W/out'))['service'] == sys.argv[1]" "$s"
done <<'EOF2'
/system.slice/nginx.service|nginx_worker|3
/docker/web|web_handler|2
/k8s/prod/db-0/postgres|pg_exec|5
/k8s-cronjob/ns/backup|backup_run|1
nginx|plain_nginx|2
/weird/a+b %2F c?d=e&f#g:8080|weird_fn|1
EOF2
expect_exit 3 "$PFR" --store "$N" flame --service /k8s/default $NR
expect_exit 3 "$PFR" --store "$N" flame --service k8s/default/api $NR
expect_exit 3 "$PFR" --store "$N" flame --service /k8s/default/api/ $NR
check "unknown service: the list has no control byte" bash -c "! grep -qP '[\x00-\x09\x0b-\x1f\x7f]' '$W/err'"
check "unknown service: names escaped in the list" grep -qF '"semi;colon\nnew line\x1b[31mred\x1b[0m"' "$W/err"
# one instance of the Deployment, as Coroot's per-instance view (Labels['container.id'])
for i in x2b5k:4 q9zzm:1; do
    inst=${i%:*}
    per=${i#*:}
    expect_exit 0 "$PFR" --store "$N" flame --service /k8s/default/api $NR --format folded \
        --label "container.id=/k8s/default/api-7d4f9c6b8d-$inst/app"
    check "--label container.id=.../$inst selects that instance" test "$(cat "$W/out")" = "main;api_$inst $((30 * per))000000000"
done
expect_exit 0 "$PFR" --store "$N" flame --service /k8s/default/api $NR --format folded
check "the service without a label: both instances" test "$(wc -l <"$W/out")" = 2
expect_exit 0 "$PFR" --store "$N" flame $NR --format folded --label "container.id=/k8s/default/api-7d4f9c6b8d-x2b5k/app"
check "--label container.id without --service: the one service that has it" test "$(cat "$W/out")" = "main;api_x2b5k 120000000000"
expect_exit 3 "$PFR" --store "$N" flame --service /k8s/default/api $NR --label "container.id=/k8s/default/api-7d4f9c6b8d-zzzzz/app"
expect_exit 0 "$PFR" --store "$N" export --service /k8s/default/api $NR \
    --label "container.id=/k8s/default/api-7d4f9c6b8d-q9zzm/app" -o "$W/inst.pb.gz"
if [ -x "$GO" ]; then
    "$GO" tool pprof -top "$W/inst.pb.gz" >"$W/inst.txt" 2>&1
    check "export of one instance: go tool pprof sees only its function" bash -c "grep -q api_q9zzm '$W/inst.txt' && ! grep -q api_x2b5k '$W/inst.txt'"
fi
expect_exit 0 "$PFR" --store "$N" diff --service /k8s/prod/db-0/postgres --from $((T0 + 150)) --to $((T0 + 300)) --format json -o "$W/nd.json"
check "diff json names the service" python3 -c "import json; assert json.load(open('$W/nd.json'))['service'] == '/k8s/prod/db-0/postgres'"
# every service at once: the first frame is the service's name, one line per stack
expect_exit 0 "$PFR" --store "$N" flame $NR --format folded
check "folded: 12 stacks on 12 lines" test "$(wc -l <"$W/out")" = 12
check "folded: a ';' or newline in a name is escaped" grep -qxF 'semi\x3bcolon\nnew line\x1b[31mred\x1b[0m;main;hostile_control 30000000000' "$W/out"
check "folded: Coroot names are the first frame" grep -qxF '/k8s-cronjob/ns/backup;main;backup_run 30000000000' "$W/out"
expect_exit 0 "$PFR" --store "$N" flame $NR --format top --limit 50
check "top: no control byte" bash -c "! grep -qP '[\x00-\x09\x0b-\x1f\x7f]' '$W/out'"
# pictures and json of hostile names: well-formed, the name exact where it is data
HOSTILE='<!--<script><img src=x onerror=alert(1)>"'"'"'&amp;</script>'
i=0
for s in "$HOSTILE" $'semi;colon\nnew line\x1b[31mred\x1b[0m' $'bytes\xff\xfe' "/k8s/long/$(printf 'x%.0s' $(seq 2000))" ""; do
    i=$((i + 1))
    svc=(--service "$s")
    [ -n "$s" ] || svc=()
    for f in svg html json; do
        expect_exit 0 "$PFR" --store "$N" flame "${svc[@]}" $NR -o "$W/h$i.$f"
    done
    expect_exit 0 "$PFR" --store "$N" diff "${svc[@]}" --from $((T0 + 150)) --to $((T0 + 300)) -o "$W/hd$i.html"
    expect_exit 0 "$PFR" --store "$N" timeline "${svc[@]}" $NR --format json -o "$W/ht$i.json"
    python3 - "$W" $i "$s" <<'EOF2' && ok "hostile name $i: svg is XML, json exact, html data inert" || bad "hostile name $i"
import json, os, sys, xml.etree.ElementTree as ET
w, i = sys.argv[1], sys.argv[2]
# the name's JSON form (docs/query.md): bad bytes as \xHH (none of these has a backslash)
name = ''.join('\\x%02x' % (ord(c) - 0xdc00) if 0xdc80 <= ord(c) <= 0xdcff else c
               for c in os.fsencode(sys.argv[3]).decode('utf-8', 'surrogateescape'))
ET.parse(f'{w}/h{i}.svg')
d = json.load(open(f'{w}/h{i}.json'))
assert d['service'] == (name or None), (d['service'], name)
assert json.load(open(f'{w}/ht{i}.json'))['service'] == (name or None)
for page in (f'{w}/h{i}.html', f'{w}/hd{i}.html'):
    html = open(page, encoding='utf-8').read()
    data = html[html.index('id="pfr-data">') + 14:]
    data = data[:data.index('</script>')]
    assert '<' not in data, 'a < in the data element'
    assert json.loads(data)['service'] == (name or None)
EOF2
done

# ---- names that need escapes (pfr_fx_escapes in ring_fixture.c): printed, they select ----
E=$W/escapes.db
"$MK" "$E" escapes --chunks 3 --start $T0 || exit 1
python3 - "$PFR" "$E" $T0 <<'EOF2' && ok "escaped names: ls json selects, folded reads back" || bad "escaped names"
import json, re, subprocess, sys
pfr, ring, t0 = sys.argv[1], sys.argv[2], sys.argv[3]
rng = ['--from', t0, '--to', str(int(t0) + 30)]
# (service, container.id, leaf, value) as the fixture writes them: bytes
want = [(b'comm\xff\xfe', b'id\xc3(', b'leaf\xc3(\xed\xa0\x80', 1), (b'a\\x3bb', b'a\\x3bb', b'fn\\x3bb', 2),
        (b'a;b', b'a;b', b'fn;b', 3), (b'with space', b'with space', b'fn with space', 4),
        (b'new\nline', b'new\nline', b'fn\nline\t\x1b', 5),
        (b'dev-disk-by\\x2duuid.device', b'by\\x2duuid', b'by\\x2dfn', 6),
        (b'two\\\\back\\xff', b'\\xFF\\', b'C:\\dir\\\\x80\\u0041', 7), (b'\\', b'\\\xff', b'\\', 8)]

def run(*args):
    r = subprocess.run([pfr, '--store', ring, *args], capture_output=True)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout

def read_folded(t):
    """A folded frame back to its bytes, as docs/query.md says a reader does."""
    def one(m):
        e = m.group(0)
        if e == b'\\\\': return b'\\'
        if e[1:2] in b'ntr': return {b'n': b'\n', b't': b'\t', b'r': b'\r'}[e[1:2]]
        if e[1:2] == b'x': return bytes([int(e[2:], 16)])
        return chr(int(e[2:], 16)).encode()
    return re.sub(rb'\\(\\|[ntr]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})', one, t)

ls = json.loads(run('ls', '--format', 'json'))['services']
assert len(ls) == len(want), [s['name'] for s in ls]
seen = set()
for s in ls:
    name, cid = s['name'], s['labels']['container.id'][0]
    lines = run('flame', '--service', name, '--label', 'container.id=' + cid, *rng,
                '--format', 'folded').splitlines()
    assert len(lines) == 1 and lines[0].startswith(b'main;'), (name, lines)
    frames, value = lines[0].rsplit(b' ', 1)
    leaf = read_folded(frames[5:])
    hit = [w for w in want if w[2] == leaf and int(value) == 3 * w[3] * 10**9]
    assert len(hit) == 1, (name, lines)
    seen.add(hit[0][0])
    assert json.loads(run('timeline', '--service', name, *rng, '--format', 'json'))['service'] == name
assert seen == {w[0] for w in want}, seen
# a slice of one service, named as ls printed it
bad = next(s['name'] for s in ls if s['name'].startswith('comm'))
run('export', '--ring', ring + '.slice', '--force', '--service', bad, *rng)
sl = subprocess.run([pfr, '--store', ring + '.slice', 'ls', '--format', 'json'], capture_output=True)
assert [s['name'] for s in json.loads(sl.stdout)['services']] == [bad], sl
# every service at once: the service is the first frame; "a\x3bb" and "a;b" two lines apart
lines = run('flame', *rng, '--format', 'folded').splitlines()
assert b'a\\\\x3bb;main;fn\\\\x3bb 6000000000' in lines and b'a\\x3bb;main;fn\\x3bb 9000000000' in lines, lines
got = sorted(tuple(read_folded(f) for f in l.rsplit(b' ', 1)[0].split(b';')) for l in lines)
assert got == sorted((w[0], b'main', w[2]) for w in want), got
EOF2

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

# counters read from the ring are range-checked: a tampered count is no 18446744073709551611
cp "$R" "$W/tampered.db"
sqlite3 "$W/tampered.db" "UPDATE meta SET value = -5 WHERE key = 'evicted'"
expect_exit 0 "$PFR" --store "$W/tampered.db" ls
check "a tampered counter is not wrapped" bash -c "! grep -q 18446744 '$W/out'"
check "a tampered counter is reported" grep -q "counters are out of range" "$W/out"
rm -f "$W/tampered.db"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
