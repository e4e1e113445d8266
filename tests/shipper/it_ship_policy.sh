#!/usr/bin/env bash
# What the Coroot sink sends by default (ship = agent) is what Coroot's node agent would: only
# chunks with a Coroot container id, and not of a systemd system service (the agent's list of
# unit prefixes, or the sink's system_service_prefixes; a oneshot unit or one an enabled timer
# starts, read from the unit files under systemd_root). The chunks left out are passed over for
# good (the cursor moves past them, they are never sent later) and counted (status: skipped);
# the ring keeps them. ship = all sends every chunk.
source "$(dirname "$0")/lib.sh"
# seven services, one interval each twice: svc-0 a Kubernetes container, svc-1 a Docker one,
# svc-2 no Coroot id (a plain process), svc-3 a system service (systemd-*), svc-4 a templated
# getty unit (its sub-slice), svc-5 a service the agent keeps (nginx), svc-6 a oneshot unit that
# an enabled timer starts (apt-daily: a system service by its unit file, not by its name)
CIDS="/k8s/default/pod-0/app,/docker/web,-,/system.slice/systemd-journald.service"
CIDS="$CIDS,/system.slice/system-getty.slice,/system.slice/nginx.service"
CIDS="$CIDS,/system.slice/apt-daily.service"
mkring --services 7 --intervals 2 --stacks 20 --seed 3 --cids "$CIDS"
[ "$(ring_chunks)" = 14 ] || fail "the ring should hold 14 chunks"
# the host's unit files, as a fixture root (nginx.service has none: not a system service)
U="$T/units"
mkdir -p "$U/lib/systemd/system" "$U/etc/systemd/system/timers.target.wants"
printf '[Service]
Type=oneshot
ExecStart=/usr/lib/apt/apt.systemd.daily update
' \
    >"$U/lib/systemd/system/apt-daily.service"
printf '[Timer]
OnCalendar=*-*-* 6,18:00
' >"$U/lib/systemd/system/apt-daily.timer"
ln -s /lib/systemd/system/apt-daily.timer "$U/etc/systemd/system/timers.target.wants/"
FAST+=(--systemd-root "$U")
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
[ "$(status_field coroot skipped_chunks)" = 8 ] || fail "status: skipped != 8"
[ "$(status_field coroot cursor)" = 14 ] || fail "the cursor did not move past the skipped chunks"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" |
    grep "passed over   8 chunks the node agent would not send" >/dev/null ||
    fail "status text does not show the chunks passed over"
grep -q "systemd unit apt-daily.service: loaded, Type=oneshot, TriggeredBy=apt-daily.timer: a system service" \
    "$T/ship.log" || fail "the log does not say why apt-daily.service was passed over"
say "ship = agent: svc-0 svc-1 svc-5 went, 8 chunks passed over (apt-daily: oneshot)"

# passed over for good: a second run sends nothing more; new chunks of the kept services go
ship_co --once >"$T/ship2.log" 2>&1 || fail "second --once failed"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 6 ] || fail "skipped chunks were sent later"
mkring --services 7 --intervals 1 --stacks 20 --seed 4 --cids "$CIDS"
ship_co --once >"$T/ship3.log" 2>&1 || fail "third --once failed"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 9 ] || fail "the new chunks of the kept services did not go"
[ "$(status_field coroot skipped_chunks)" = 12 ] || fail "status: skipped != 12"

# the sink's own list: nginx is a system service there, systemd-* no longer (apt-daily still is:
# its unit file says oneshot)
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
[ "$got" = "svc-0 svc-1 svc-3 svc-4 svc-5 svc-6 " ] ||
    fail "skip_system_services = false sent '$got', want every service with a Coroot id"

# ship = all: every chunk, those without a Coroot id too
restart
ship_co --once --ship all >"$T/all.log" 2>&1 ||
    fail "--once --ship all failed: $(tail -3 "$T/all.log")"
got=$(shipped_services)
[ "$got" = "svc-0 svc-1 svc-2 svc-3 svc-4 svc-5 svc-6 " ] || fail "ship = all sent '$got'"
[ "$(ls "$T"/bodies/*.pb.gz | wc -l)" = 21 ] || fail "ship = all: 21 chunks should have arrived"
[ "$(status_field coroot skipped_chunks)" = 0 ] || fail "ship = all skipped chunks"
say "ok"
