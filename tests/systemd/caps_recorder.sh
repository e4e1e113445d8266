#!/usr/bin/env bash
# The recorder as a non-root user with exactly the capabilities of its unit (AmbientCapabilities=
# of systemd/pfr-recorder.service) records CPU profiles; its ring is 0640 whatever the umask; a
# user of the ring's group reads it (pfr ls, and pfr-shipper --once into the Coroot test server)
# after the recorder stopped, another user cannot. Without CAP_BPF and/or CAP_PERFMON the
# recorder exits non-zero with a message naming the missing capability.
#
# Runs as root (it sets the users with setpriv); uses numeric uids/gids no account has, so it
# changes nothing in /etc/passwd or /etc/group.
set -euo pipefail
: "${RECORDER:?}" "${PFR:?}" "${UNIT:?}"
SHIPPER=${SHIPPER:-}
COROOT_SERVER=${COROOT_SERVER:-}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || {
    echo "SKIP: needs root (to switch users and hand over capabilities)"
    exit 77
}
command -v setpriv >/dev/null || {
    echo "SKIP: setpriv (util-linux) missing"
    exit 77
}
[ -r /sys/kernel/btf/vmlinux ] || {
    echo "SKIP: no kernel BTF"
    exit 77
}

# A uid for the recorder, one for a reader in the ring's group, one for anybody else, and the
# ring's group: the first free run of ids from 64990 down.
free_id() {
    local i
    for ((i = $1; i > 60000; i--)); do
        getent passwd "$i" >/dev/null || getent group "$i" >/dev/null || {
            echo "$i"
            return
        }
    done
    fail "no free id"
}
REC_UID=$(free_id 64990)
READER_UID=$(free_id $((REC_UID - 1)))
OTHER_UID=$(free_id $((READER_UID - 1)))
RING_GID=$(free_id $((OTHER_UID - 1)))

# The unit's capabilities, as setpriv wants them: +bpf,+perfmon,...
unit_caps=$(sed -n 's/^AmbientCapabilities=//p' "$UNIT")
[ -n "$unit_caps" ] || fail "no AmbientCapabilities= in $UNIT"
bound=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")
[ "$unit_caps" = "$bound" ] || fail "AmbientCapabilities= and CapabilityBoundingSet= differ in $UNIT"
to_setpriv() {
    local c out=""
    for c in "$@"; do
        c=${c#CAP_}
        out+=",+${c,,}"
    done
    echo "${out#,}"
}
without() { # without CAP... : the unit's capabilities less those named
    local c keep=() drop
    for c in $unit_caps; do
        for drop in "$@"; do [ "$c" = "$drop" ] && continue 2; done
        keep+=("$c")
    done
    echo "${keep[@]}"
}
echo "unit capabilities: $unit_caps"

T=$(mktemp -d /tmp/pfr-caps.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -z "${DOCKER_CG:-}" ] || rmdir "$DOCKER_CG" 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
chmod 0755 "$T"
# The state folder as tmpfiles.d/pfr.conf makes it: the recorder's, group-readable; the cursor
# folder group-writable and setgid.
mkdir -p "$T/lib/ring.db-cursors" "$T/shipper"
chown "$REC_UID:$RING_GID" "$T/lib" "$T/lib/ring.db-cursors"
chmod 0750 "$T/lib"
chmod 2770 "$T/lib/ring.db-cursors"
chown "$READER_UID" "$T/shipper"
chmod 0700 "$T/shipper"

# rec_cmd CAPS...: REC_CMD = the recorder as its user with exactly these capabilities.
rec_cmd() {
    local sp
    sp=$(to_setpriv "$@")
    local capargs=(--inh-caps=-all --ambient-caps=-all --bounding-set=-all)
    if [ -n "$sp" ]; then
        capargs=(--inh-caps="-all,$sp" --ambient-caps="-all,$sp" --bounding-set="-all,$sp")
    fi
    REC_CMD=(setpriv --reuid="$REC_UID" --regid="$RING_GID" --clear-groups "${capargs[@]}"
        "$RECORDER" --config /dev/null --store "$T/lib/ring.db")
}

# ---- a Docker container the recorder names without new privileges ----
# Docker's socket is root's (no group docker for the recorder's user): the container's name is
# read from Docker's data folder, root's too, which CAP_DAC_READ_SEARCH lets the recorder read.
CG2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$CG2" ] || fail "no cgroup v2 mount"
DOCKER_RID=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
DOCKER_CG="$CG2/system.slice/docker-$DOCKER_RID.scope"
mkdir -p "$T/docker/containers/$DOCKER_RID" "$DOCKER_CG"
echo '{"ID": "'"$DOCKER_RID"'", "Name": "/caps-web", "Config": {"Labels": {}, "Env": []}}' \
    >"$T/docker/containers/$DOCKER_RID/config.v2.json"
chmod 0600 "$T/docker/containers/$DOCKER_RID/config.v2.json"
chmod 0700 "$T/docker"
python3 -c 'import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o600)' "$T/docker.sock"

# ---- with the unit's capabilities: it records ----
# shellcheck disable=SC2086
rec_cmd $unit_caps
: >"$T/rec.log"
# The metrics endpoint on a free port; no local pprof discovery (it would scrape whatever Go
# servers run on this machine).
(umask 022 && exec "${REC_CMD[@]}" --interval 1 --metrics-listen 127.0.0.1:0 --scrape-local off \
    --docker-socket "$T/docker.sock" --docker-root "$T/docker" >"$T/rec.log" 2>&1) &
rec=$!
PIDS+=("$rec")
for _ in $(seq 1 100); do
    grep -q ": sampling with" "$T/rec.log" && break
    kill -0 "$rec" 2>/dev/null || break
    sleep 0.1
done
# Something to sample: on an idle machine (CI runs this test alone) every CPU may sit idle for
# the whole run, and idle samples are not counted.
timeout 60 bash -c 'while :; do :; done' &
spin=$!
PIDS+=("$spin")
# ... and in the Docker container's cgroup
sh -c 'echo $$ >"$1/cgroup.procs" && exec timeout 4 bash -c "while :; do :; done"' sh "$DOCKER_CG" &
PIDS+=("$!")
port=$(sed -n 's/.*metrics: .*(port \([0-9]*\)).*/\1/p' "$T/rec.log" | head -1)
metrics_ok=0
unwind_ok=0
if [ -n "$port" ] && command -v curl >/dev/null; then
    # The counter moves at each 1 s interval's drain; allow a slow (sanitized) build on a loaded
    # machine 60 s (the unwinder runs at nice +5: under two CPU hogs it waits). The
    # unwind tables are built from files opened through /proc/PID/root, which the unit's
    # capabilities allow (no CAP_SYS_ADMIN for /proc/PID/map_files): some must be, and stacks
    # walked with them.
    for _ in $(seq 1 120); do
        sleep 0.5
        curl -sf "http://127.0.0.1:$port/metrics" >"$T/metrics.txt" || continue
        grep -q "^pfr_cpu_samples_total [1-9]" "$T/metrics.txt" && metrics_ok=1
        grep -q '^pfr_unwind_files_total{outcome="table"} [1-9]' "$T/metrics.txt" &&
            grep -q '^pfr_cpu_stacks_walked_total{method="dwarf"} [1-9]' "$T/metrics.txt" &&
            unwind_ok=1
        [ "$metrics_ok" = 1 ] && [ "$unwind_ok" = 1 ] && break
    done
fi
kill -TERM "$rec" 2>/dev/null || true
kill "$spin" 2>/dev/null || true
rc=0
wait "$rec" || rc=$?
cat "$T/rec.log"
[ "$rc" = 0 ] || fail "pfr-recorder with the unit's capabilities exited $rc"
"$PFR" --store "$T/lib/ring.db" ls --format json >"$T/ls.json" || fail "pfr ls failed"
python3 - "$T/ls.json" <<'EOF' || fail "no CPU profiles in the ring"
import json, sys
d = json.load(open(sys.argv[1]))
text = json.dumps(d)
assert "ebpf:cpu:nanoseconds" in text, "no ebpf:cpu:nanoseconds profile"
assert '"/docker/caps-web"' in text, "the Docker container is not named /docker/caps-web"
EOF
rmdir "$DOCKER_CG" 2>/dev/null || true
"$PFR" --store "$T/lib/ring.db" ls >"$T/ls.txt"
head -1 "$T/ls.txt"
[ "$metrics_ok" = 1 ] || fail "no pfr_cpu_samples_total on the metrics endpoint (port '${port:-}')"
[ "$unwind_ok" = 1 ] || fail "no unwind table built or used with the unit's capabilities: \
$(grep -E '^pfr_(unwind_files_total|cpu_stacks_walked_total)' "$T/metrics.txt" | tr '\n' ' ')"
echo "metrics endpoint (port $port): $(grep -c '^pfr_' "$T/metrics.txt") pfr_ series"

# ---- the ring's files: 0640, the recorder's user and the ring's group ----
for f in "$T"/lib/ring.db*; do
    [ -f "$f" ] || continue
    m=$(stat -c '%a %u %g' "$f")
    [ "$m" = "640 $REC_UID $RING_GID" ] || fail "$f: mode/owner '$m', want '640 $REC_UID $RING_GID'"
done
[ -e "$T/lib/ring.db-shm" ] || fail "the recorder removed ring.db-shm: group readers could not open the ring"

# ---- a member of the ring's group reads it (the recorder is stopped); anybody else cannot ----
setpriv --reuid="$READER_UID" --regid="$READER_UID" --groups="$RING_GID" \
    --inh-caps=-all --bounding-set=-all "$PFR" --store "$T/lib/ring.db" ls >"$T/reader.log" 2>&1 ||
    fail "a member of the ring's group cannot read it: $(cat "$T/reader.log")"
if setpriv --reuid="$OTHER_UID" --regid="$OTHER_UID" --clear-groups --inh-caps=-all \
    --bounding-set=-all "$PFR" --store "$T/lib/ring.db" ls >"$T/other.log" 2>&1; then
    fail "a user outside the ring's group read it"
fi

# ---- the shipper as a member of the ring's group: reads the ring, writes its cursor ----
if [ -x "$SHIPPER" ] && [ -x "$COROOT_SERVER" ]; then
    key=k$RANDOM$RANDOM
    mkdir "$T/bodies"
    "$COROOT_SERVER" --dir "$T/bodies" --api-key "$key" --port 0 --port-file "$T/coport" \
        --log "$T/coroot.log" &
    PIDS+=("$!")
    for _ in $(seq 1 100); do
        [ -s "$T/coport" ] && break
        sleep 0.1
    done
    [ -s "$T/coport" ] || fail "the Coroot test server did not start"
    echo "$key" >"$T/shipper/key"
    chown "$READER_UID" "$T/shipper/key"
    chmod 0600 "$T/shipper/key"
    (umask 0027 && exec setpriv --reuid="$READER_UID" --regid="$READER_UID" --groups="$RING_GID" \
        --inh-caps=-all --bounding-set=-all "$SHIPPER" --config /dev/null --once \
        --store "$T/lib/ring.db" --state "$T/shipper/state.db" --sink coroot \
        --url "http://127.0.0.1:$(cat "$T/coport")" --api-key-file "$T/shipper/key" \
        --batch-age 0 --deadline 60s) >"$T/ship.log" 2>&1 ||
        fail "pfr-shipper in the ring's group failed: $(tail -5 "$T/ship.log")"
    n=$(find "$T/bodies" -name '*.pb.gz' | wc -l)
    [ "$n" -gt 0 ] || fail "the shipper sent nothing"
    [ -f "$T/lib/ring.db-cursors/shipper.coroot" ] || fail "no cursor file shipper.coroot"
    m=$(stat -c '%g' "$T/lib/ring.db-cursors/shipper.coroot")
    [ "$m" = "$RING_GID" ] || fail "the cursor file's group is $m, want the ring's ($RING_GID)"
    echo "shipper (uid $READER_UID, group $RING_GID): $n profiles delivered"
else
    echo "pfr-shipper or coroot_server not built: shipper part skipped"
fi

# ---- without CAP_BPF / CAP_PERFMON: exits non-zero, naming what is missing ----
expect_refusal() { # expect_refusal NAME... -- CAPS...
    local names=() caps=()
    while [ "$1" != -- ]; do
        names+=("$1")
        shift
    done
    shift
    caps=("$@")
    local rc=0
    rec_cmd "${caps[@]}"
    (umask 022 && exec timeout 20 "${REC_CMD[@]}" --interval 1) >"$T/no.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] || fail "pfr-recorder with only '${caps[*]}' exited 0"
    # The sentence before "(or CAP_SYS_ADMIN)" names exactly the missing ones.
    local said n
    said=$(grep -o "missing capability [^(]*" "$T/no.log" | head -1) ||
        fail "without ${names[*]}: no 'missing capability' message: $(cat "$T/no.log")"
    for n in "${names[@]}"; do
        [[ $said == *"$n"* ]] || fail "without $n: the message does not name it: $said"
    done
    for n in CAP_BPF CAP_PERFMON; do
        [[ " ${names[*]} " == *" $n "* ]] && continue
        [[ $said != *"$n"* ]] || fail "$n is granted but the message names it: $said"
    done
    echo "without ${names[*]}: exit $rc: $(tail -1 "$T/no.log")"
}
# shellcheck disable=SC2046
expect_refusal CAP_BPF CAP_PERFMON -- $(without CAP_BPF CAP_PERFMON)
# shellcheck disable=SC2046
expect_refusal CAP_BPF -- $(without CAP_BPF)
# shellcheck disable=SC2046
expect_refusal CAP_PERFMON -- $(without CAP_PERFMON)
echo PASS
