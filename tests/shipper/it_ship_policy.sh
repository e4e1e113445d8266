#!/usr/bin/env bash
# What the Coroot sink sends by default (ship = agent) is what Coroot's node agent would: only
# chunks with a Coroot container id, and not of a systemd system service (the agent's list of
# unit prefixes, or the sink's system_service_prefixes). The chunks left out are passed over for
# good (the cursor moves past them, they are never sent later) and counted (status: skipped);
# the ring keeps them. ship = all sends every chunk.
source "$(dirname "$0")/lib.sh"
# six services, one interval each twice: svc-0 a Kubernetes container, svc-1 a Docker one, svc-2
# no Coroot id (a plain process), svc-3 a system service (systemd-*), svc-4 a templated getty
# unit (its sub-slice), svc-5 a service the agent keeps (nginx)
CIDS="/k8s/default/pod-0/app,/docker/web,-,/system.slice/systemd-journald.service"
CIDS="$CIDS,/system.slice/system-getty.slice,/system.slice/nginx.service"
mkring --services 6 --intervals 2 --stacks 20 --seed 3 --cids "$CIDS"
[ "$(ring_chunks)" = 12 ] || fail "the ring should hold 12 chunks"
start_coroot
# a new run: an empty Coroot and a new state file
restart() {
    stop_coroot
    rm -rf "$T/bodies" "$T"/state.db*
    start_coroot
}
shipped_services() {
    for f in "$T"/bodies/*.txt; do
        head -1 "$f" | tr '&' '\n' | sed -n 's/^service\.name=//p'
    done | sort -u | tr '\n' ' '
}

ship_co --once >"$T/ship.log" 2>&1 || fail "shipper --once failed: $(tail -3 "$T/ship.log")"
got=$(shipped_services)
[ "$got" = "svc-0 svc-1 svc-5 " ] ||
    fail "ship = agent sent services '$got', the agent's are 'svc-0 svc-1 svc-5 '"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 6 ] || fail "ship = agent: 6 chunks should have arrived"
[ "$(status_field coroot delivered_chunks)" = 6 ] || fail "status: delivered != 6"
[ "$(status_field coroot skipped_chunks)" = 6 ] || fail "status: skipped != 6"
[ "$(status_field coroot cursor)" = 12 ] || fail "the cursor did not move past the skipped chunks"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" |
    grep "passed over   6 chunks the node agent would not send" >/dev/null ||
    fail "status text does not show the chunks passed over"
say "ship = agent: svc-0 svc-1 svc-5 went, 6 chunks passed over"

# passed over for good: a second run sends nothing more; new chunks of the kept services go
ship_co --once >"$T/ship2.log" 2>&1 || fail "second --once failed"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 6 ] || fail "skipped chunks were sent later"
mkring --services 6 --intervals 1 --stacks 20 --seed 4 --cids "$CIDS"
ship_co --once >"$T/ship3.log" 2>&1 || fail "third --once failed"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 9 ] || fail "the new chunks of the kept services did not go"
[ "$(status_field coroot skipped_chunks)" = 9 ] || fail "status: skipped != 9"

# the sink's own list: nginx is a system service there, systemd-* no longer
printf '[sink coroot]\ntype = coroot\nsystem_service_prefixes = nginx,system-getty\n' >"$T/own.ini"
restart
ship_co --once --config "$T/own.ini" >"$T/own.log" 2>&1 ||
    fail "--once with the sink's own prefixes failed: $(tail -3 "$T/own.log")"
got=$(shipped_services)
[ "$got" = "svc-0 svc-1 svc-3 " ] ||
    fail "system_service_prefixes = nginx,system-getty sent '$got', want 'svc-0 svc-1 svc-3 '"

# skip_system_services = false: every service with a Coroot id
restart
ship_co --once --skip-system-services false >"$T/nofilter.log" 2>&1 ||
    fail "--once --skip-system-services false failed: $(tail -3 "$T/nofilter.log")"
got=$(shipped_services)
[ "$got" = "svc-0 svc-1 svc-3 svc-4 svc-5 " ] ||
    fail "skip_system_services = false sent '$got', want every service with a Coroot id"

# ship = all: every chunk, those without a Coroot id too
restart
ship_co --once --ship all >"$T/all.log" 2>&1 ||
    fail "--once --ship all failed: $(tail -3 "$T/all.log")"
got=$(shipped_services)
[ "$got" = "svc-0 svc-1 svc-2 svc-3 svc-4 svc-5 " ] || fail "ship = all sent '$got'"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 18 ] || fail "ship = all: 18 chunks should have arrived"
[ "$(status_field coroot skipped_chunks)" = 0 ] || fail "ship = all skipped chunks"
say "ok"
