#!/usr/bin/env bash
# A backfill with the batch settings recommended for backfills (256M / 8000 chunks) runs within a
# cgroup memory limit of 96 MiB: the shipper is not killed for memory, exits 0, and ClickHouse
# holds the ring exactly. The ring (50 services x 60 intervals, 3,000 chunks of testgen's
# realistic profiles) fits in one such batch: the shipper before streamed inserts (2026-11-26)
# held it as columns and bodies, and peaked at ~400 MiB on it (OOM-killed under this limit).
# The limit: cgroup v2 (the first cgroup2 mount, memory.max) if its memory controller is there,
# else cgroup v1's memory hierarchy (memory.limit_in_bytes). Not being able to set one fails.
source "$(dirname "$0")/lib.sh"
need_chdb
LIMIT=$((96 << 20))
# A sanitized shipper carries ASan's shadow and quarantine: there the limit is four times as
# much (the test still catches memory that grows with the batch); the 96 MiB bound itself is
# checked on the release build, which scripts/test.sh runs this test in too.
# Its ring is a third as long (1,000 chunks): making 3,000 with the sanitized ringtool took most
# of the test's ~170 s, and what the sanitizers look at here, the batch's paths, is the same.
INTERVALS=60
if [ "${PFR_SANITIZED:-0}" = 1 ]; then
    LIMIT=$((4 * LIMIT))
    INTERVALS=20
fi
CHUNKS=$((50 * INTERVALS))
CG=
cg_cleanup() {
    cleanup
    [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null || true
}
trap cg_cleanup EXIT

# A child cgroup of this process's own with the memory limit; CG_KIND says which version.
cg_make() {
    local v2 own
    v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
    if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null; then
        own=$(sed -n 's/^0:://p' /proc/self/cgroup)
        local parent=$v2${own%/}
        # A cgroup with processes cannot enable controllers for its children (no internal
        # processes): the test's cgroup goes beside this shell's, under its parent, if need be.
        if ! grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null; then
            echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null || parent=$(dirname "$parent")
            grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null ||
                echo +memory >"$parent/cgroup.subtree_control" ||
                fail "cannot enable the memory controller in $parent"
        fi
        CG=$parent/pfr-test-$$
        mkdir "$CG" || fail "cannot create $CG"
        echo "$LIMIT" >"$CG/memory.max" || fail "cannot set $CG/memory.max"
        [ -e "$CG/memory.swap.max" ] && echo 0 >"$CG/memory.swap.max"
        CG_KIND=v2
        return
    fi
    local v1
    v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ {print $2; exit}' /proc/mounts)
    [ -n "$v1" ] || fail "no cgroup memory controller (v2 or v1) to limit the shipper with"
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
    CG=$v1${own%/}/pfr-test-$$
    mkdir "$CG" || fail "cannot create $CG"
    echo "$LIMIT" >"$CG/memory.limit_in_bytes" || fail "cannot set $CG/memory.limit_in_bytes"
    [ -e "$CG/memory.memsw.limit_in_bytes" ] && echo "$LIMIT" >"$CG/memory.memsw.limit_in_bytes"
    CG_KIND=v1
}
cg_oom_kills() {
    if [ "$CG_KIND" = v2 ]; then
        awk '$1 == "oom_kill" {print $2}' "$CG/memory.events"
    else
        awk '$1 == "oom_kill" {print $2}' "$CG/memory.oom_control"
    fi
}
cg_peak() {
    if [ "$CG_KIND" = v2 ]; then cat "$CG/memory.peak" 2>/dev/null || echo "?"; else cat "$CG/memory.max_usage_in_bytes"; fi
}

mkring --services 50 --intervals "$INTERVALS" --seed 7
start_front
cg_make
say "limit $((LIMIT >> 20)) MiB in $CG ($CG_KIND)"
read -r first last < <(ring_span)
set +e
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" \
    "$SHIPPER" backfill --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
    --url "http://127.0.0.1:$CH_PORT" --api-key-file "$T/chkey" --user pfr --database coroot \
    --create-tables --batch-bytes 256M --batch-chunks 8000 --timeout 120s \
    --from "@$((first / 1000000000))" --to "@$((last / 1000000000 + 1))" --deadline 0 \
    --log-level info >"$T/bf.log" 2>&1
code=$?
set -e
kills=$(cg_oom_kills)
say "shipper exit $code, OOM kills $kills, peak $(($(cg_peak) >> 20)) MiB of the cgroup"
[ "$kills" = 0 ] || fail "the shipper was OOM-killed ($kills) under $((LIMIT >> 20)) MiB"
[ "$code" = 0 ] || fail "backfill exited $code: $(tail -3 "$T/bf.log")"
grep -q "$CHUNKS/$CHUNKS chunks (100.0%).*done" "$T/bf.log" || fail "no final progress line: $(tail -3 "$T/bf.log")"
check_ch_exact
echo PASS
