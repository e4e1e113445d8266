#!/usr/bin/env bash
# Coroot shows pfr's profiles as its applications' own. Three workloads run in cgroups made
# here, as on a real host: a systemd service, a Docker container (with a Docker API stand-in on a
# unix socket) and a Kubernetes pod's container (with a kubelet stand-in). The real recorder
# profiles them; for each, container.id and service.name must be exactly Coroot's, in the ring, in
# the Coroot sink's query strings and in the ClickHouse rows, and Coroot's own flame-graph query
# (service set from the container ids, with and without the per-instance filter) must return the
# workload's stacks.
. "$(dirname "$0")/lib.sh"
need_chdb
: "${RECORDER:?}" "${STORE_DUMP:?}" "${WORKLOADS:?}"
WL=$WORKLOADS/pfr-calltree-nopie
[ -x "$WL" ] || fail "$WL not built"
CG2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$CG2" ] || fail "no cgroup v2 mount: the recorder names processes from it"

hex64() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
R=$RANDOM$RANDOM
UNIT_DIR="/system.slice/pfr\\x2dit$R.service"  # systemd escapes '-' in unit names as \x2d
UNIT_ID="/system.slice/pfr-it$R.service"
DOCKER_RID=$(hex64)
DOCKER_DIR="/system.slice/docker-$DOCKER_RID.scope"
DOCKER_ID="/docker/pfr-web-$R"
K8S_RID=$(hex64)
POD_UID=$(cat /proc/sys/kernel/random/uuid)
POD_DIR="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_UID//-/_}.slice"
K8S_DIR="$POD_DIR/cri-containerd-$K8S_RID.scope"
POD=api-7d4f9c8b6-x2b5k
K8S_ID="/k8s/prod-$R/$POD/app"
K8S_SVC="/k8s/prod-$R/api"

DIRS=("$UNIT_DIR" "$DOCKER_DIR" "$K8S_DIR")
WPIDS=()
cleanup_cgroups() {
    local p d
    for p in "${WPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${WPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for d in "${DIRS[@]}"; do rmdir "$CG2$d" 2>/dev/null || true; done
    rmdir "$CG2$POD_DIR" "$CG2/kubepods.slice/kubepods-burstable.slice" \
        "$CG2/kubepods.slice" 2>/dev/null || true
    cleanup
}
trap cleanup_cgroups EXIT
# Run the workload inside cgroup $1 (moved there before exec, as a runtime does).
run_in() {
    mkdir -p "$CG2$1"
    sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" 40' sh "$CG2$1" "$WL" &
    WPIDS+=($!)
}

say "metadata stand-ins"
echo "$DOCKER_RID pfr-web-$R" >"$T/docker-names"
cat >"$T/pods.json" <<JSON
{"kind": "PodList", "apiVersion": "v1", "items": [
 {"metadata": {"name": "$POD", "namespace": "prod-$R", "uid": "$POD_UID"},
  "spec": {"nodeName": "node1", "containers": [{"name": "app"}]},
  "status": {"phase": "Running", "podIP": "10.0.0.9",
             "containerStatuses": [{"name": "app", "containerID": "containerd://$K8S_RID"}]}}]}
JSON
python3 "$(dirname "$0")/meta_standin.py" --docker-socket "$T/docker.sock" \
    --docker-names "$T/docker-names" --kubelet-pods "$T/pods.json" --port-file "$T/kport" \
    2>"$T/standin.log" &
PIDS+=($!)
wait_file "$T/kport"
wait_until 10 test -S "$T/docker.sock" || fail "the Docker stand-in did not start"

run_in "$UNIT_DIR"
run_in "$DOCKER_DIR"
run_in "$K8S_DIR"

say "recording"
"$RECORDER" --store "$T/ring.db" --interval 2 --metrics-listen off --go-heap-profiler disabled \
    --scrape-local off --docker-socket "$T/docker.sock" --docker-root "$T/no-docker-root" \
    --kubelet-url "http://127.0.0.1:$(cat "$T/kport")" --log-level debug >"$T/recorder.log" 2>&1 &
REC=$!
PIDS+=("$REC")
ring_has_all() {
    "$STORE_DUMP" "$T/ring.db" --meta >"$T/meta.json" 2>/dev/null || return 1
    python3 - "$T/meta.json" "$UNIT_ID" "$DOCKER_ID" "$K8S_ID" <<'PY'
import json, sys
ids = {json.loads(l)["labels"].get("container.id") for l in open(sys.argv[1]) if l.strip()}
sys.exit(0 if set(sys.argv[2:]) <= ids else 1)
PY
}
wait_until 40 ring_has_all || { tail -20 "$T/recorder.log" >&2; fail "the ring lacks some identities"; }
# Short-lived processes of the service: some are first sampled while they exit, their memory
# and /proc entry already gone; their cgroup still names them.
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2/pfr-spawn-storm" 300 5 "$2/pfr-short-lived" 3' \
    sh "$CG2$UNIT_DIR" "$WORKLOADS" >"$T/storm.out" || fail "the spawn storm failed"
sleep 2 # the storm's last interval
kill -TERM "$REC"
wait "$REC" || fail "the recorder exited with $?"
named=$(grep -o 'exiting_named=[0-9]*' "$T/recorder.log" | tail -1 | cut -d= -f2)
[ "${named:-0}" -gt 0 ] || fail "no process was first sampled while exiting ($(cat "$T/storm.out"))"
say "$named processes first sampled while exiting, named by their cgroup"

say "the ring: service.name and container.id as Coroot's"
"$STORE_DUMP" "$T/ring.db" --samples >"$T/samples.json"
python3 - "$T/samples.json" "$UNIT_ID=$UNIT_ID" "$DOCKER_ID=$DOCKER_ID" "$K8S_ID=$K8S_SVC" <<'PY' ||
import json, sys
chunks = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for want in sys.argv[2:]:
    cid, svc = want.split("=", 1)
    mine = [c for c in chunks if c["labels"].get("container.id") == cid]
    if not mine:
        sys.exit("no chunk has container.id %s" % cid)
    names = {c["service"] for c in mine}
    if names != {svc}:
        sys.exit("container %s: services %s, Coroot's is %s" % (cid, names, svc))
    fns = {f["function"] for c in mine for s in c.get("samples", []) for f in s["frames"]}
    if "pfr_work_loop" not in fns:
        sys.exit("container %s: the workload's stacks are missing (%s)" % (cid, sorted(fns)[:20]))
    others = [c for c in chunks if c["service"] == svc and c["labels"].get("container.id") != cid]
    if others:
        sys.exit("service %s also has chunks without its container id" % svc)
# The recorder profiles the whole host: other processes (other tests' short-lived ones, whose
# transient cgroups are gone too) may be [exited]; the storm's, whose cgroup stays, must not be.
ours = ("pfr-short-lived", "pfr-spawn-storm")
exited = [s for c in chunks if c["service"] == "[exited]" for s in c.get("samples", [])]
mine = [s for s in exited if s["comm"] in ours]
if mine:
    sys.exit("%d samples of the storm's exiting processes are named [exited] (comm: %s)"
             % (len(mine), sorted({s["comm"] for s in mine})))
if exited:
    print("(%d samples of other processes named [exited]: %s)"
          % (len(exited), sorted({s["comm"] for s in exited})[:10]))
PY
    fail "identities in the ring are not Coroot's"

say "the Coroot sink's query strings"
start_coroot
ship_co --once >"$T/ship-co.log" 2>&1 || fail "pfr-shipper --once (coroot) failed: $(tail -3 "$T/ship-co.log")"
python3 - "$T/bodies" "$UNIT_ID=$UNIT_ID" "$DOCKER_ID=$DOCKER_ID" "$K8S_ID=$K8S_SVC" <<'PY' ||
import glob, sys, urllib.parse
seen = set()
for f in glob.glob(sys.argv[1] + "/*.txt"):
    q = urllib.parse.parse_qs(open(f).readline().strip())
    seen.add((q.get("container.id", [""])[0], q["service.name"][0]))
for want in sys.argv[2:]:
    cid, svc = want.split("=", 1)
    if (cid, svc) not in seen:
        sys.exit("no profile arrived with container.id=%s service.name=%s" % (cid, svc))
PY
    fail "the Coroot sink did not send Coroot's identities"

say "the ClickHouse rows and Coroot's own flame-graph query"
start_front
ship_ch --once >"$T/ship-ch.log" 2>&1 || fail "pfr-shipper --once (clickhouse) failed: $(tail -3 "$T/ship-ch.log")"
# Coroot's query (clickhouse/queries.go): samples of the services its application view builds
# from the container ids, optionally of those containers only, joined to their stacks.
coroot_flame() { # services containers
    chq "WITH samples AS (SELECT StackHash AS hash, sum(Value) AS value FROM profiling_samples
           WHERE ServiceName IN ($1) AND Type = 'ebpf:cpu:nanoseconds'
             AND Start < now64(9) AND End > now64(9) - INTERVAL 1 HOUR
             AND (empty([$2]::Array(String)) OR has([$2]::Array(String), Labels['container.id']))
           GROUP BY StackHash HAVING value > 0 ORDER BY value DESC LIMIT 5000),
         stacks AS (SELECT Hash AS hash, any(Stack) AS stack FROM profiling_stacks
           WHERE ServiceName IN ($1) AND LastSeen > now64(9) - INTERVAL 1 HOUR
             AND Hash GLOBAL IN (SELECT hash FROM samples) GROUP BY Hash)
         SELECT value, arrayStringConcat(stack, ';') FROM stacks JOIN samples USING (hash)
         FORMAT TabSeparatedRaw"
}
for pair in "$UNIT_ID=$UNIT_ID" "$DOCKER_ID=$DOCKER_ID" "$K8S_ID=$K8S_SVC"; do
    cid=${pair%%=*}
    svc=${pair#*=}
    got=$(chq "SELECT DISTINCT ServiceName FROM profiling_samples
               WHERE Labels['container.id'] = '$cid' FORMAT TabSeparatedRaw")
    [ "$got" = "$svc" ] || fail "ClickHouse rows of $cid have ServiceName '$got', Coroot's is $svc"
    coroot_flame "'$svc'" "" >"$T/flame-app.tsv"
    grep -q "pfr_work_loop" "$T/flame-app.tsv" ||
        fail "Coroot's application flame graph of $svc lacks the workload's stacks"
    coroot_flame "'$svc'" "'$cid'" >"$T/flame-inst.tsv"
    grep -q "pfr_work_loop" "$T/flame-inst.tsv" ||
        fail "Coroot's per-instance flame graph of $cid lacks the workload's stacks"
    say "$cid ($svc): $(wc -l <"$T/flame-inst.tsv") stacks in Coroot's flame graph"
done
say "ok"
