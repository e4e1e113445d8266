#!/usr/bin/env bash
# The installed default config files are accepted by their programs as they are, and with every
# commented-out key (and example section) switched on: so each key and each default written
# there is one the program takes. recorder.ini holds every key `pfr-recorder --help` lists.
set -euo pipefail
: "${PREFIX:?}" "${WORK:?}" "${BINDIR:?}" "${SBINDIR:?}" "${SYSCONFDIR:?}"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
full() {
    case $2 in
    /*) echo "$2" ;;
    *) echo "$1/$2" ;;
    esac
}
etc=$(full "$PREFIX" "$SYSCONFDIR")/pfr
recorder=$(full "$PREFIX" "$SBINDIR")/pfr-recorder
shipper=$(full "$PREFIX" "$BINDIR")/pfr-shipper
[ -s "$etc/recorder.ini" ] || fail "no installed $etc/recorder.ini (install_tree first)"
T=$WORK/config
rm -rf "$T"
mkdir -p "$T"
chmod 0755 "$T"

# Every "#key = value" line and "#[sink NAME]" header switched on.
sed -E 's/^#([a-z0-9_]+ = )/\1/; s/^#(\[sink [a-z]+\])$/\1/' "$etc/recorder.ini" >"$T/recorder-all.ini"
sed -E 's/^#([a-z0-9_]+ = )/\1/; s/^#(\[sink [a-z]+\])$/\1/' "$etc/shipper.ini" >"$T/shipper-all.ini"
chmod 0644 "$T"/*.ini
grep -q "^\[sink coroot\]" "$T/shipper-all.ini" || fail "shipper.ini has no example Coroot sink"
grep -q "^\[sink clickhouse\]" "$T/shipper-all.ini" || fail "shipper.ini has no example ClickHouse sink"

# The recorder reads its configuration before it loads BPF: run without capabilities, a good
# file ends in "missing capability" (exit 1), a bad one in a config error (exit 2).
run_recorder() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
            "$recorder" "$@"
    else
        "$recorder" "$@"
    fi
}
for f in "$etc/recorder.ini" "$T/recorder-all.ini"; do
    rc=0
    run_recorder --config "$f" --store "$T/ring.db" >"$T/rec.log" 2>&1 || rc=$?
    if [ "$rc" != 1 ] || ! grep -q "missing capability" "$T/rec.log"; then
        fail "pfr-recorder --config $f: exit $rc: $(cat "$T/rec.log")"
    fi
    echo "ok: pfr-recorder takes $(basename "$f")"
done
# A broken file is refused (so the check above means something).
printf '[recorder]\ncpu_hz = lots\n' >"$T/bad.ini"
rc=0
run_recorder --config "$T/bad.ini" --store "$T/ring.db" >"$T/rec.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "pfr-recorder took a bad config file (exit $rc)"

# recorder.ini holds every key of `pfr-recorder --help`, and no other: every option it lists
# is a [recorder] key (the flag's name with underscores) but --config, --service-rule,
# --scrape-target, --no-dwarf (key dwarf), --help and --version.
"$recorder" --help >"$T/help.txt"
keys_help=$(grep -E '^\s+--' "$T/help.txt" | grep -oE -- '--[a-z][a-z0-9-]*' |
    grep -vxE -- '--(config|service-rule|scrape-target|help|version)' |
    sed 's/^--//; s/^no-dwarf$/dwarf/; s/-/_/g' | sort -u)
grep -q "is also a" "$T/help.txt" || fail "pfr-recorder --help no longer says which options are keys"
keys_ini=$(sed -n -E 's/^#?([a-z0-9_]+) =( .*)?$/\1/p' "$etc/recorder.ini" | grep -vxE 'rule|target' | sort -u)
[ -n "$keys_help" ] || fail "no options in pfr-recorder --help"
[ "$keys_help" = "$keys_ini" ] ||
    fail "recorder.ini keys differ from --help: $(diff <(echo "$keys_help") <(echo "$keys_ini") | tr '\n' ' ')"
echo "ok: recorder.ini has the $(echo "$keys_help" | wc -l) keys of pfr-recorder --help"

# The shipper: `status` loads the whole file (no secrets); a config error is exit 2.
for f in "$etc/shipper.ini" "$T/shipper-all.ini"; do
    rc=0
    env -u PFR_STORE "$shipper" status --config "$f" --store "$T/none.db" \
        --state "$T/none-state.db" >"$T/ship.log" 2>&1 || rc=$?
    [ "$rc" != 2 ] || fail "pfr-shipper refuses $f: $(cat "$T/ship.log")"
    echo "ok: pfr-shipper takes $(basename "$f") (status exit $rc)"
done
printf '[sink x]\ntype = coroot\nbatch_age = soon\n' >"$T/bad.ini"
rc=0
"$shipper" status --config "$T/bad.ini" --store "$T/none.db" --state "$T/none-state.db" \
    >"$T/ship.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "pfr-shipper took a bad config file (exit $rc)"
echo PASS
