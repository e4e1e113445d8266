#!/usr/bin/env bash
# The Debian package, end to end on this machine (as root):
# - built the documented way (a release tree for /usr + /etc, `cmake --build T --target
#   package`) as pfr_<version>_amd64.deb, plus the same at version <version>+1 for the upgrade;
#   a tree for another layout (the one running this test) is refused;
# - lintian finds no error; Depends names the package of every library the programs link;
# - dpkg -i: programs, units, config files (conffiles), docs, man pages in place; users pfr and
#   pfr-shipper (in group pfr) and the folders made; nothing enabled; systemd-analyze verify
#   passes on the installed units;
# - the installed recorder, as user pfr with exactly its unit's capabilities (setpriv: systemd is
#   not PID 1 here), writes the ring; the installed shipper, as pfr-shipper, reads it and keeps
#   its state;
# - the upgrade keeps the ring, the shipper's state, the users and an edited conffile;
# - dpkg -r keeps config files, users, ring and state (and an enable link); dpkg -P leaves
#   nothing: files, folders, users, groups, enable links;
# - where systemd-sysusers and systemd-tmpfiles are missing or fail, the postinst makes the same
#   users and folders with adduser and install.
# Whatever happens, the trap purges the package: the machine is left as it was found.
# deb.sh build: the packages and their metadata, nothing installed (ctest package_deb_build, which
# runs beside other tests); deb.sh install: the rest, with the packages a build left in TREE and
# WORK (ctest package_deb, alone); deb.sh (all): both.
set -euo pipefail
: "${SRC:?}" "${TREE:?}" "${WORK:?}" "${VERSION:?}" "${RUN_TREE:?}" "${RUN_SYSCONFDIR:?}"
# TREE_GIVEN=1: TREE is a release tree configured for /usr + /etc by whoever runs the test (cmake
# -DPFR_RELEASE_TREE=...; scripts/test.sh's gcc tree), packaged as it is: the package target's
# check (cmake/PfrDebCheck.cmake) refuses it if it is laid out otherwise.
TREE_GIVEN=${TREE_GIVEN:-0}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || {
    echo "SKIP: needs root (dpkg -i on this machine)"
    exit 77
}
for tool in dpkg-deb dpkg-shlibdeps lintian systemd-analyze setpriv readelf; do
    command -v "$tool" >/dev/null || {
        echo "SKIP: $tool missing (scripts/install-deps.sh installs it)"
        exit 77
    }
done
[ -r /sys/kernel/btf/vmlinux ] || {
    echo "SKIP: no kernel BTF (the recorder cannot run)"
    exit 77
}
MODE=${1:-all}
case $MODE in
build | install | all) ;;
*) fail "usage: deb.sh [build|install|all]" ;;
esac
mkdir -p "$WORK"
T=$(mktemp -d /tmp/pfr-deb.XXXXXX)
chmod 0755 "$T"
trap 'rm -rf "$T"' EXIT
DEB=$TREE/pfr_${VERSION}_amd64.deb
DEB2_VERSION=$VERSION+1
DEB2=$WORK/v2/pfr_${DEB2_VERSION}_amd64.deb
# the package's files, Depends and conffiles, into $T
deb_lists() {
    dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort >"$T/files"
    dpkg-deb -f "$DEB" Depends | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort -u >"$T/depends"
    dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | sort >"$T/conffiles"
}

if [ "$MODE" != install ]; then
    # ---- build: the documented commands, a release tree of its own (kept: later runs rebuild
    # only what changed) ----
    rm -f "$TREE"/pfr_*.deb
    if [ "$TREE_GIVEN" != 1 ]; then
        cmake -S "$SRC" -B "$TREE" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPFR_BUILD_TESTS=OFF \
            -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc >"$WORK/configure.log" 2>&1 ||
            fail "configure: $(tail -20 "$WORK/configure.log")"
    fi
    cmake --build "$TREE" -j2 --target package >"$WORK/build.log" 2>&1 ||
        fail "cmake --build --target package: $(tail -20 "$WORK/build.log")"
    [ -f "$DEB" ] || fail "no $DEB: $(ls "$TREE"/*.deb 2>&1)"
    rm -rf "$WORK/v2"
    (cd "$TREE" && cpack -D CPACK_PACKAGE_VERSION="$DEB2_VERSION" -B "$WORK/v2") \
        >"$WORK/cpack2.log" 2>&1 || fail "cpack at $DEB2_VERSION: $(tail -20 "$WORK/cpack2.log" \
        "$WORK"/v2/_CPack_Packages/*/DEB/PreinstallOutput.log)"
    [ -f "$DEB2" ] || fail "no $DEB2"
    dpkg --compare-versions "$DEB2_VERSION" gt "$VERSION" || fail "$DEB2_VERSION is not newer"
    echo "ok: built $(basename "$DEB") ($(stat -c %s "$DEB") bytes) and $(basename "$DEB2")"

    # The tree running this test, if laid out for /usr/local, cannot make the package.
    if [ "$RUN_SYSCONFDIR" != /etc ]; then
        if cpack --config "$RUN_TREE/CPackConfig.cmake" -B "$WORK/refused" >"$WORK/refused.log" 2>&1; then
            fail "cpack packaged a tree with CMAKE_INSTALL_SYSCONFDIR=$RUN_SYSCONFDIR"
        fi
        grep -q "CMAKE_INSTALL_SYSCONFDIR=/etc" "$WORK/refused.log" ||
            fail "the refusal does not say what to configure: $(cat "$WORK/refused.log")"
        echo "ok: a tree with CMAKE_INSTALL_SYSCONFDIR=$RUN_SYSCONFDIR is refused"
    fi

    # ---- the package's metadata ----
    lintian --fail-on error "$DEB" >"$WORK/lintian.log" 2>&1 ||
        fail "lintian: $(cat "$WORK/lintian.log")"
    echo "ok: lintian: no error ($(grep -c '^W:' "$WORK/lintian.log" || true) warnings)"
    deb_lists
    printf '%s\n' /etc/pfr/recorder.ini /etc/pfr/shipper.ini | diff - "$T/conffiles" ||
        fail "conffiles: not the two config files"
    for f in /usr/sbin/pfr-recorder /usr/bin/pfr-shipper /usr/bin/pfr /etc/pfr/recorder.ini \
        /etc/pfr/shipper.ini /usr/lib/systemd/system/pfr-recorder.service \
        /usr/lib/systemd/system/pfr-shipper.service /usr/lib/sysusers.d/pfr.conf \
        /usr/lib/tmpfiles.d/pfr.conf /usr/share/doc/pfr/README.md /usr/share/doc/pfr/operations.md \
        /usr/share/doc/pfr/copyright /usr/share/doc/pfr/changelog.gz \
        /usr/share/doc/pfr/examples/pfr-recorder-java.conf \
        /usr/share/man/man8/pfr-recorder.8.gz; do
        grep -qx "$f" "$T/files" || fail "$f is not in the package"
    done
    grep -qx adduser "$T/depends" || fail "Depends lacks adduser"
    if [ "$MODE" = build ]; then
        echo PASS
        exit 0
    fi
else
    [ -f "$DEB" ] && [ -f "$DEB2" ] || fail "no $DEB or $DEB2: deb.sh build (ctest package_deb_build) makes them"
    deb_lists
fi

# One run at a time on this machine, whichever build tree it comes from.
exec 9>/run/lock/pfr-package-test.lock
flock -w 240 9 || fail "another run of this test holds /run/lock/pfr-package-test.lock"
# Set while this test may have pfr installed: a run killed before its trap leaves it behind, and
# the next run knows the package is its own to purge.
MARK=/var/lib/pfr-package-test.installed
PIDS=()

known() { dpkg-query -W -f='${Status}\n' pfr 2>/dev/null | grep -v not-installed >/dev/null; }
# dpkg_do ARGS...: dpkg, waiting for the lock apt or another dpkg may hold; output in $T/dpkg.log
dpkg_do() {
    for _ in $(seq 1 60); do
        if dpkg "$@" >"$T/dpkg.log" 2>&1; then
            return 0
        fi
        grep -q "lock" "$T/dpkg.log" || return 1
        sleep 2
    done
    return 1
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if known; then
        dpkg_do -P pfr || cat "$T/dpkg.log" >&2
    fi
    known || rm -f "$MARK"
    rm -rf "$T"
}
trap cleanup EXIT

if known; then
    [ -e "$MARK" ] || fail "package pfr is installed on this machine (not by this test): \
this test installs and purges it; remove it first"
    echo "a previous run left pfr installed: purging it"
    dpkg_do -P pfr || fail "dpkg -P pfr: $(cat "$T/dpkg.log")"
fi
for n in pfr pfr-shipper; do
    ! getent passwd "$n" >/dev/null || fail "user $n exists: this test creates and deletes it"
    ! getent group "$n" >/dev/null || fail "group $n exists: this test creates and deletes it"
done
for d in /etc/pfr /var/lib/pfr /var/lib/pfr-shipper; do
    [ ! -e "$d" ] || fail "$d exists: this test creates and deletes it"
done

# ---- install ----
echo "$DEB" >"$MARK"
dpkg_do -i "$DEB" || fail "dpkg -i: $(cat "$T/dpkg.log")"
! grep -Ei "warning|error" "$T/dpkg.log" || fail "dpkg -i printed the lines above"
while read -r f; do [ -e "$f" ] || fail "$f not installed"; done <"$T/files"
# Every library the programs link comes from a package named in Depends (dpkg-shlibdeps).
ldconfig -p >"$T/ldconfig"
for b in /usr/sbin/pfr-recorder /usr/bin/pfr-shipper /usr/bin/pfr; do
    for lib in $(readelf -d "$b" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
        path=$(awk -v l="$lib" '$1 == l && /x86-64/ && !n++ {print $NF}' "$T/ldconfig")
        [ -n "$path" ] || fail "$b links $lib, which ldconfig does not know"
        owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null ||
            dpkg -S "/usr$path" 2>/dev/null || dpkg -S "${path#/usr}") ||
            fail "no package owns $path"
        grep -qx "${owner%%:*}" "$T/depends" ||
            fail "$b links $lib of package ${owner%%:*}, which Depends does not name"
    done
done
echo "ok: installed; Depends: $(paste -sd' ' "$T/depends")"

want() { # want PATH 'MODE USER GROUP'
    local got
    got=$(stat -c '%a %U %G' "$1") || fail "$1 is missing"
    [ "$got" = "$2" ] || fail "$1: '$got', want '$2'"
}
# users_and_folders: what sysusers.d/pfr.conf and tmpfiles.d/pfr.conf say, on this machine
users_and_folders() {
    local u
    for u in pfr pfr-shipper; do
        # adduser writes the full name as the first of the comment's fields: "NAME,,,".
        getent passwd "$u" | cut -d: -f1,5,6,7 | sed 's/,,,:/:/'
        [ "$(id -gn "$u")" = "$u" ] || fail "$u's group is $(id -gn "$u")"
    done
    id -nG pfr-shipper | tr ' ' '\n' | grep -x pfr >/dev/null || fail "pfr-shipper is not in group pfr"
    want /var/lib/pfr "750 pfr pfr"
    want /var/lib/pfr/ring.db-cursors "2770 pfr pfr"
    want /etc/pfr/credentials "700 root root"
}
users_and_folders >"$T/accounts"
printf '%s\n' "pfr:pfr profile recorder:/var/lib/pfr:/usr/sbin/nologin" \
    "pfr-shipper:pfr shipper:/var/lib/pfr-shipper:/usr/sbin/nologin" | diff - "$T/accounts" ||
    fail "users differ from sysusers.d/pfr.conf"
WANTS=/etc/systemd/system/multi-user.target.wants
for u in pfr-recorder pfr-shipper; do
    [ ! -e "$WANTS/$u.service" ] || fail "installing enabled $u"
done
echo "ok: users, group, folders; nothing enabled"

for u in pfr-recorder pfr-shipper; do
    systemd-analyze verify "/usr/lib/systemd/system/$u.service" >"$T/verify.log" 2>&1 ||
        fail "systemd-analyze verify $u.service: $(cat "$T/verify.log")"
    ! grep -q . "$T/verify.log" || fail "systemd-analyze verify $u.service: $(cat "$T/verify.log")"
done
echo "ok: systemd-analyze verify on the installed units"

# ---- the installed recorder: user pfr, exactly its unit's capabilities, its config file ----
UNIT=/usr/lib/systemd/system/pfr-recorder.service
caps=$(sed -n 's/^AmbientCapabilities=//p' "$UNIT" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
[ -n "$caps" ] || fail "no AmbientCapabilities= in $UNIT"
# As the unit: UMask=0027; no metrics port of its own nor scraping of this machine's Go programs
# (other tests may run beside this one).
(umask 0027 && exec setpriv --reuid=pfr --regid=pfr --init-groups --inh-caps="-all,$caps" \
    --ambient-caps="-all,$caps" --bounding-set="-all,$caps" /usr/sbin/pfr-recorder \
    --config /etc/pfr/recorder.ini --interval 1 --metrics-listen 127.0.0.1:0 --scrape-local off) \
    >"$WORK/recorder.log" 2>&1 &
rec=$!
PIDS+=("$rec")
for _ in $(seq 1 100); do
    grep -q ": sampling with" "$WORK/recorder.log" && break
    kill -0 "$rec" 2>/dev/null || break
    sleep 0.1
done
grep -q ": sampling with" "$WORK/recorder.log" || fail "the recorder did not start: $(cat "$WORK/recorder.log")"
timeout 2 bash -c 'while :; do :; done' || true
sleep 1.5
kill -TERM "$rec"
rc=0
wait "$rec" || rc=$?
[ "$rc" = 0 ] || fail "pfr-recorder exited $rc: $(cat "$WORK/recorder.log")"
want /var/lib/pfr/ring.db "640 pfr pfr"
pfr ls --format json >"$T/ls.json" || fail "pfr ls failed"
grep -q "ebpf:cpu:nanoseconds" "$T/ls.json" || fail "no CPU profile in the ring: $(cat "$T/ls.json")"
# A member of group pfr reads it.
setpriv --reuid=pfr-shipper --regid=pfr-shipper --init-groups pfr ls >/dev/null ||
    fail "pfr-shipper (group pfr) cannot read the ring"
echo "ok: the installed recorder (capabilities $caps) wrote the ring: $(pfr ls | head -1)"

# ---- the installed shipper keeps state: a sink nobody answers, 2 s ----
# Its state folder is its unit's StateDirectory=, which systemd would make.
install -d -o pfr-shipper -g pfr-shipper -m 0700 /var/lib/pfr-shipper
echo key >"$T/key"
chown pfr-shipper "$T/key"
chmod 0600 "$T/key"
# --ship all: the ring holds this host's processes, most of them without a Coroot container id,
# which the default policy (agent) passes over: every chunk must be tried for attempts to count.
ship() { # ship ARGS...: the installed shipper as its user, with the packaged config file
    setpriv --reuid=pfr-shipper --regid=pfr-shipper --init-groups pfr-shipper "$@" \
        --config /etc/pfr/shipper.ini --sink coroot --url http://127.0.0.1:9 --api-key-file "$T/key" \
        --ship all
}
rc=0
ship --once --deadline 2s >"$WORK/shipper.log" 2>&1 || rc=$?
[ "$rc" = 75 ] || [ "$rc" = 69 ] || fail "pfr-shipper --once exited $rc: $(cat "$WORK/shipper.log")"
ship status --json >"$T/status-1.json" || fail "pfr-shipper status failed"
grep -q '"attempts": [1-9]' "$T/status-1.json" || fail "no attempt in the state: $(cat "$T/status-1.json")"
echo "ok: the installed shipper keeps its state in /var/lib/pfr-shipper/state.db"

# ---- upgrade to $DEB2_VERSION: ring, state, users and an edited conffile kept ----
sums() { sha256sum /var/lib/pfr/ring.db /var/lib/pfr-shipper/state.db; }
sums >"$T/sums-1"
# pfr ls, less the free space of the file system (other programs write there meanwhile)
ring_ls() { pfr ls --format json | grep -v '"fs_free_bytes"'; }
ring_ls >"$T/ls-1.json"
getent passwd pfr pfr-shipper >"$T/passwd-1"
echo "max_store_bytes = 64M   # edited by the operator" >>/etc/pfr/recorder.ini
sha256sum /etc/pfr/recorder.ini >"$T/conf-1"
dpkg_do -i "$DEB2" || fail "upgrade: $(cat "$T/dpkg.log")"
! grep -Ei "warning|error" "$T/dpkg.log" || fail "dpkg -i (upgrade) printed the lines above"
[ "$(dpkg-query -W -f='${Version}' pfr)" = "$DEB2_VERSION" ] || fail "not upgraded"
sums | diff "$T/sums-1" - || fail "the upgrade changed the ring or the shipper's state"
getent passwd pfr pfr-shipper | diff "$T/passwd-1" - || fail "the upgrade changed the users"
sha256sum -c --quiet "$T/conf-1" || fail "the upgrade changed the edited recorder.ini"
[ ! -e /etc/pfr/recorder.ini.dpkg-dist ] || fail "the upgrade left recorder.ini.dpkg-dist"
want /var/lib/pfr/ring.db "640 pfr pfr"
ring_ls | diff "$T/ls-1.json" - || fail "pfr ls differs after the upgrade"
ship status --json | diff "$T/status-1.json" - || fail "pfr-shipper status differs after the upgrade"
echo "ok: upgraded to $DEB2_VERSION; ring, shipper state, users, edited conffile kept"

# ---- remove: config files, users, ring and state stay ----
systemctl enable pfr-recorder.service >/dev/null 2>&1 || fail "systemctl enable pfr-recorder"
[ -L "$WANTS/pfr-recorder.service" ] || fail "systemctl enable made no link"
dpkg_do -r pfr || fail "dpkg -r: $(cat "$T/dpkg.log")"
! grep -Ei "warning|error" "$T/dpkg.log" || fail "dpkg -r printed the lines above"
dpkg-query -W -f='${Status}\n' pfr | grep -x "deinstall ok config-files" >/dev/null ||
    fail "after dpkg -r: $(dpkg-query -W -f='${Status}' pfr)"
while read -r f; do
    if grep -qx "$f" "$T/conffiles"; then
        [ -f "$f" ] || fail "dpkg -r removed the conffile $f"
    else
        [ ! -e "$f" ] || fail "dpkg -r left $f"
    fi
done <"$T/files"
sha256sum -c --quiet "$T/conf-1" || fail "dpkg -r changed the edited recorder.ini"
sums | diff "$T/sums-1" - || fail "dpkg -r changed the ring or the shipper's state"
getent passwd pfr pfr-shipper | diff "$T/passwd-1" - || fail "dpkg -r changed the users"
[ -d /etc/pfr/credentials ] || fail "dpkg -r removed /etc/pfr/credentials"
echo "ok: removed; config files, users, ring, state kept"

# ---- purge: nothing left ----
# purged: nothing of the package on this machine any more
purged() {
    local n
    ! known || fail "dpkg still knows pfr: $(dpkg-query -W -f='${Status}' pfr)"
    while read -r f; do [ ! -e "$f" ] || fail "purge left $f"; done <"$T/files"
    for f in /etc/pfr /var/lib/pfr /var/cache/pfr /var/lib/pfr-shipper "$WANTS/pfr-recorder.service"; do
        if [ -e "$f" ] || [ -L "$f" ]; then fail "purge left $f"; fi
    done
    ! find /var/lib/systemd/deb-systemd-helper-enabled -name 'pfr-*' 2>/dev/null | grep . ||
        fail "purge left deb-systemd-helper state"
    for n in pfr pfr-shipper; do
        ! getent passwd "$n" >/dev/null || fail "purge left user $n"
        ! getent group "$n" >/dev/null || fail "purge left group $n"
    done
}
dpkg_do -P pfr || fail "dpkg -P: $(cat "$T/dpkg.log")"
! grep -Ei "warning|error" "$T/dpkg.log" || fail "dpkg -P printed the lines above"
purged
echo "ok: purged; no file, folder, enable link, user or group left"

# ---- without working systemd-sysusers / systemd-tmpfiles: the same, with adduser ----
mkdir -p "$T/shim"
for tool in systemd-sysusers systemd-tmpfiles; do
    printf '#!/bin/sh\nexit 1\n' >"$T/shim/$tool"
    chmod 0755 "$T/shim/$tool"
done
PATH=$T/shim:$PATH dpkg_do -i "$DEB" || fail "dpkg -i (no systemd tools): $(cat "$T/dpkg.log")"
grep -q "no working systemd-sysusers" "$T/dpkg.log" || fail "the postinst did not fall back: \
$(cat "$T/dpkg.log")"
grep -q "no working systemd-tmpfiles" "$T/dpkg.log" || fail "the postinst did not fall back"
cp "$T/dpkg.log" "$WORK/fallback.log"
users_and_folders | diff "$T/accounts" - || fail "adduser made other users than systemd-sysusers"
dpkg_do -P pfr || fail "dpkg -P: $(cat "$T/dpkg.log")"
purged
echo "ok: without systemd-sysusers/-tmpfiles: the same users and folders; purged"
echo PASS
