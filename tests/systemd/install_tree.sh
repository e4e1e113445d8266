#!/usr/bin/env bash
# cmake --install puts the programs, the default config files, the units, sysusers.d and
# tmpfiles.d entries and the docs where they belong, with the unit paths rewritten for the
# prefix; DESTDIR stages without leaking into the paths; the sysusers.d and tmpfiles.d entries
# create the users, group and folders the units expect (in a scratch root).
# Leaves the install in $PREFIX for the other tests of this folder.
set -euo pipefail
: "${BUILD:?}" "${WORK:?}" "${PREFIX:?}" "${CONFIGURED_PREFIX:?}" "${UNIT_DIR:?}"
: "${SYSUSERS_DIR:?}" "${TMPFILES_DIR:?}" "${BINDIR:?}" "${SBINDIR:?}" "${SYSCONFDIR:?}"
: "${DOCDIR:?}"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
full() { # full PREFIX DIR: DIR under PREFIX unless absolute
    case $2 in
    /*) echo "$2" ;;
    *) echo "$1/$2" ;;
    esac
}
# An absolute directory is not moved by --prefix: in a tree configured for packaging (the
# release tree's /etc) the scratch install would write the host's /etc/pfr, which later runs
# (package_deb) refuse to find there. Checked before anything is installed.
for d in "$SYSCONFDIR" "$BINDIR" "$SBINDIR" "$UNIT_DIR" "$SYSUSERS_DIR" "$TMPFILES_DIR" "$DOCDIR"; do
    case $d in
    /*) fail "install directory $d is absolute: a scratch install here would write the host's" \
        "(run these tests in a tree configured with relative install directories)" ;;
    esac
done
rm -rf "$WORK"
mkdir -p "$WORK"

check_tree() { # check_tree ROOT PREFIX: the files of an install of PREFIX staged under ROOT
    local root=$1 p=$2 f
    local bin sbin etc units doc
    bin=$(full "$p" "$BINDIR")
    sbin=$(full "$p" "$SBINDIR")
    etc=$(full "$p" "$SYSCONFDIR")/pfr
    units=$(full "$p" "$UNIT_DIR")
    doc=$(full "$p" "$DOCDIR")
    for f in "$bin/pfr" "$bin/pfr-shipper" "$sbin/pfr-recorder"; do
        [ -x "$root$f" ] || fail "$root$f: missing or not executable"
    done
    for f in "$etc/recorder.ini" "$etc/shipper.ini" "$units/pfr-recorder.service" \
        "$units/pfr-shipper.service" "$(full "$p" "$SYSUSERS_DIR")/pfr.conf" \
        "$(full "$p" "$TMPFILES_DIR")/pfr.conf" "$doc/README.md" "$doc/architecture.md" \
        "$doc/configuration.md" "$doc/operations.md" "$doc/comparison.md"; do
        [ -s "$root$f" ] || fail "$root$f: missing"
    done
    grep -qx "ExecStart=$sbin/pfr-recorder --config $etc/recorder.ini" \
        "$root$units/pfr-recorder.service" || fail "pfr-recorder.service: ExecStart= not rewritten"
    grep -qx "ExecStart=$bin/pfr-shipper --config $etc/shipper.ini" \
        "$root$units/pfr-shipper.service" || fail "pfr-shipper.service: ExecStart= not rewritten"
    grep -qx "LoadCredential=pfr:$etc/credentials" "$root$units/pfr-shipper.service" ||
        fail "pfr-shipper.service: LoadCredential= not rewritten"
    grep -q "^d $etc/credentials 0700 root root" "$root$(full "$p" "$TMPFILES_DIR")/pfr.conf" ||
        fail "tmpfiles.d/pfr.conf: credentials folder not rewritten"
    if [ "$root" != "" ]; then
        grep -rq "$root" "$root$units" "$root$(full "$p" "$TMPFILES_DIR")" &&
            fail "DESTDIR $root leaked into the installed files"
    fi
    # The files are readable by everybody (no secret in them); the programs executable.
    [ "$(stat -c %a "$root$etc/shipper.ini")" = 644 ] || fail "shipper.ini is not 0644"
    echo "ok: install of $p under '${root:-/}'"
}

# ---- --prefix ----
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 ||
    fail "cmake --install --prefix failed: $(tail -5 "$WORK/install.log")"
check_tree "" "$PREFIX"

# ---- DESTDIR (staging for a package): paths inside the files are those of the real prefix ----
DESTDIR="$WORK/stage" cmake --install "$BUILD" >"$WORK/stage.log" 2>&1 ||
    fail "DESTDIR=... cmake --install failed: $(tail -5 "$WORK/stage.log")"
check_tree "$WORK/stage" "$CONFIGURED_PREFIX"

# ---- sysusers.d and tmpfiles.d, applied to a scratch root ----
if command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
    R=$WORK/root
    mkdir -p "$R/etc" "$R/usr/lib/tmpfiles.d"
    systemd-sysusers --root="$R" "$(full "$PREFIX" "$SYSUSERS_DIR")/pfr.conf" \
        >"$WORK/sysusers.log" 2>&1 || fail "systemd-sysusers: $(cat "$WORK/sysusers.log")"
    grep -q "^pfr:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$" "$R/etc/passwd" || fail "no user pfr"
    grep -q "^pfr-shipper:x:" "$R/etc/passwd" || fail "no user pfr-shipper"
    grep -qx "pfr:x:[0-9]*:pfr-shipper" "$R/etc/group" || fail "pfr-shipper is not in group pfr"
    cp "$(full "$PREFIX" "$TMPFILES_DIR")/pfr.conf" "$R/usr/lib/tmpfiles.d/pfr.conf"
    systemd-tmpfiles --root="$R" --create pfr.conf >"$WORK/tmpfiles.log" 2>&1 ||
        fail "systemd-tmpfiles: $(cat "$WORK/tmpfiles.log")"
    pfr_uid=$(awk -F: '$1 == "pfr" {print $3}' "$R/etc/passwd")
    pfr_gid=$(awk -F: '$1 == "pfr" {print $3}' "$R/etc/group")
    want() { # want PATH MODE UID GID
        local got
        got=$(stat -c '%a %u %g' "$R$1") || fail "$1 was not created"
        [ "$got" = "$2 $3 $4" ] || fail "$1: '$got', want '$2 $3 $4'"
    }
    want /var/lib/pfr 750 "$pfr_uid" "$pfr_gid"
    want /var/lib/pfr/ring.db-cursors 2770 "$pfr_uid" "$pfr_gid"
    want "$(full "$PREFIX" "$SYSCONFDIR")/pfr/credentials" 700 0 0
    echo "ok: sysusers.d and tmpfiles.d entries"
else
    echo "systemd-sysusers / systemd-tmpfiles missing: their check skipped"
fi
echo PASS
