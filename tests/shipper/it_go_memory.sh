#!/usr/bin/env bash
# Go memory totals in Coroot: three instances of one service on one host, their in-use heap
# chunks cut at the same boundaries, as the recorder cuts them. Coroot averages the in-use types
# (model/profile.go: Aggregation avg) by dividing their sum by count(distinct Start) /
# count(distinct container.id, namespace, pod) (clickhouse/queries.go, qProfiles); the sinks give
# each instance Start times of its own (pfr_coroot_start_shift), so the application's total is
# the sum of the instances' in-use memory, and an instance's is its own. Checked through both
# sinks: Coroot's query over the ClickHouse sink's rows in the real (embedded) ClickHouse, and
# the same arithmetic over the profiles the Coroot sink posted.
source "$(dirname "$0")/lib.sh"
need_chdb
TYPE=go_runtime:heap_inuse_space:bytes
SVC=/k8s/default/api
CIDS=/k8s/default/api-7d4f9c8b6-bcdfg/app,/k8s/default/api-7d4f9c8b6-hjklm/app
CIDS=$CIDS,/k8s/default/api-7d4f9c8b6-npqrs/app
K=6 # intervals
mkring --services 3 --intervals $K --interval-s 10 --stacks 40 --seed 9 --type "$TYPE" \
    --service "$SVC" --cids "$CIDS"
"$RINGTOOL" chunks --store "$T/ring.db" >"$T/chunks.txt"
read -r from to < <(ring_span)
# the truth: per instance (chunks interleaved: instance = (id - 1) % 3), the mean over the
# intervals of its in-use bytes; the application's total is their sum
python3 - "$T/chunks.txt" "$K" >"$T/truth" <<'PY'
import sys
k = int(sys.argv[2])
inst = [0, 0, 0]
for line in open(sys.argv[1]):
    cid, svc, start, end, total = line.split("\t")
    inst[(int(cid) - 1) % 3] += int(total)
print(" ".join(str(v // k) for v in inst), sum(inst) // k)
PY
read -r t0 t1 t2 tall <"$T/truth"
say "in-use bytes: instances $t0 $t1 $t2, application $tall"
# Coroot shows value/profiles per stack as toInt64: the sum may be short by one per stack
near() { python3 -c "import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if abs(a - b) <= 200 else 1)" "$1" "$2"; }

say "ClickHouse sink, Coroot's query"
start_front
ship_ch --once >"$T/ship-ch.log" 2>&1 || fail "pfr-shipper --once (clickhouse) failed: $(tail -3 "$T/ship-ch.log")"
# clickhouse/queries.go qProfileAvg with its parameters set (services, type, from, to,
# containers, namespace, pod), the tables unprefixed; the rows it returns summed (the flame
# graph's total).
coroot_avg() { # containers: '' or 'id'
    chq "WITH samples AS (
      SELECT StackHash AS hash, sum(Value) AS value FROM profiling_samples
      WHERE ServiceName IN ('$SVC') AND Type = '$TYPE'
        AND Start < fromUnixTimestamp64Nano(toInt64($to)) AND End > fromUnixTimestamp64Nano(toInt64($from))
        AND (empty([$1]::Array(String)) OR has([$1]::Array(String), Labels['container.id']))
        AND ('' = '' OR '' = Labels['namespace']) AND ('' = '' OR '' = Labels['pod'])
      GROUP BY StackHash HAVING value > 0 ORDER BY value DESC LIMIT 5000),
    stacks AS (
      SELECT Hash AS hash, any(Stack) AS stack FROM profiling_stacks
      WHERE ServiceName IN ('$SVC') AND LastSeen > fromUnixTimestamp64Nano(toInt64($from))
        AND Hash GLOBAL IN (SELECT hash FROM samples) GROUP BY Hash),
    profiles AS (
      SELECT count(distinct Start) / greatest(1, count(distinct Labels['container.id'],
             Labels['namespace'], Labels['pod'])) AS profiles
      FROM profiling_samples
      WHERE ServiceName IN ('$SVC') AND Type = '$TYPE'
        AND Start < fromUnixTimestamp64Nano(toInt64($to)) AND End > fromUnixTimestamp64Nano(toInt64($from))
        AND (empty([$1]::Array(String)) OR has([$1]::Array(String), Labels['container.id']))
        AND ('' = '' OR '' = Labels['namespace']) AND ('' = '' OR '' = Labels['pod']))
    SELECT toInt64(value/profiles), stack FROM stacks JOIN samples USING(hash), profiles
    FORMAT TabSeparatedRaw" | awk -F'\t' '{s += $1} END {printf "%.0f\n", s}'
}
got=$(coroot_avg "")
near "$got" "$tall" || fail "Coroot's application total over ClickHouse is $got, the instances' sum $tall"
starts=$(chq "SELECT count(distinct Start) FROM profiling_samples WHERE Type = '$TYPE' FORMAT TabSeparatedRaw")
[ "$starts" = $((3 * K)) ] || fail "ClickHouse: $starts distinct Start times, want one per instance and interval ($((3 * K)))"
i=0
for want in "$t0" "$t1" "$t2"; do
    cid=$(echo "$CIDS" | cut -d, -f$((i + 1)))
    got=$(coroot_avg "'$cid'")
    near "$got" "$want" || fail "Coroot's total of instance $cid over ClickHouse is $got, its own $want"
    i=$((i + 1))
done
say "ClickHouse: application $tall, each instance its own"

say "Coroot sink, the same arithmetic over what it posted"
start_coroot
ship_co --once >"$T/ship-co.log" 2>&1 || fail "pfr-shipper --once (coroot) failed: $(tail -3 "$T/ship-co.log")"
# Coroot stores each posted profile as rows Start = time_nanos - duration_nanos, End =
# time_nanos, labels from the query string; qProfiles then divides as above.
python3 - "$T/bodies" "$from" "$to" "$TYPE" "$tall" "$CIDS" "$t0" "$t1" "$t2" <<'PY' ||
import glob, gzip, sys, urllib.parse

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i

def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        elif wt == 1:
            v = int.from_bytes(b[i:i + 8], "little"); i += 8
        elif wt == 5:
            v = int.from_bytes(b[i:i + 4], "little"); i += 4
        else:
            sys.exit("bad wire type %d" % wt)
        yield f, wt, v

def packed(v, wt):
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i); out.append(x)
    return out

bodies, lo, hi, typ, tall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rows = []  # (start, container.id, namespace, pod, value)
for f in glob.glob(bodies + "/*.pb.gz"):
    q = urllib.parse.parse_qs(open(f[:-len(".pb.gz")] + ".txt").readline().strip())
    lab = lambda k: q.get(k, [""])[0]
    b = gzip.decompress(open(f, "rb").read())
    strings, types, samples, t, d = [], [], [], 0, 0
    for fn, wt, v in fields(b):
        if fn == 6: strings.append(v.decode())
        elif fn == 1: types.append(dict((x, y) for x, _, y in fields(v)).get(1, 0))
        elif fn == 2:
            vals = []
            for sf, swt, sv in fields(v):
                if sf == 2: vals += packed(sv, swt)
            samples.append(vals)
        elif fn == 9: t = v
        elif fn == 10: d = v
    ti = [strings[x] for x in types].index(typ)
    start, end = t - d, t
    if start < hi and end > lo:
        rows += [(start, lab("container.id"), lab("namespace"), lab("pod"), s[ti]) for s in samples]

def coroot_avg(containers):
    r = [x for x in rows if not containers or x[1] in containers]
    profiles = len({x[0] for x in r}) / max(1, len({x[1:4] for x in r}))
    return sum(x[4] for x in r) / profiles

got = coroot_avg([])
if abs(got - tall) > 200:
    sys.exit("Coroot's application total from the posted profiles is %d, the instances' sum %d" % (got, tall))
for cid, want in zip(sys.argv[6].split(","), sys.argv[7:]):
    got = coroot_avg([cid])
    if abs(got - int(want)) > 200:
        sys.exit("Coroot's total of %s from the posted profiles is %d, its own %s" % (cid, got, want))
print("%d rows from %d profiles" % (len(rows), len(glob.glob(bodies + "/*.pb.gz"))))
PY
    fail "the Coroot sink's profiles do not add up in Coroot"
say "ok"
