#!/usr/bin/env bash
# `pfr export --ring FILE --force` and `-o FILE` never replace anything but a regular file: a
# device (/dev/full), a FIFO, a folder, a socket or a dangling symlink is refused with an error
# and left as it was; a regular file is replaced, and so is a symlink's regular target (the link
# stays a link). Each ring written reads back with `pfr ls`.
#   export_force_test.sh PFR MAKE_RING WORKDIR
set -uo pipefail
PFR=$1
MK=$2
W=$3
source "$(dirname "$0")/lib.sh"
# refused DESCRIPTION PATTERN COMMAND...: exits non-zero and says PATTERN on stderr
refused() {
    local what=$1 pat=$2
    shift 2
    if "$@" >"$W/out" 2>"$W/err"; then
        bad "$what: exit 0"
    elif grep -q -- "$pat" "$W/err"; then
        ok "$what: refused ($(head -1 "$W/err"))"
    else
        bad "$what: message lacks '$pat': $(head -c 400 "$W/err")"
    fi
}
readable_ring() { # the file is a ring `pfr ls` reads, with the chunks exported
    "$PFR" --store "$1" ls >"$W/ls" 2>"$W/lserr" && grep -q svc-0 "$W/ls"
}

T0=1714564800
R=$W/ring.db
"$MK" "$R" testgen --chunks 6 --services 1 --start $T0 >/dev/null || {
    echo "FAIL make_ring"
    exit 1
}
X=("$PFR" --store "$R" export --service svc-0 --from $T0 --to $((T0 + 3600)))

# ---- export --ring --force ----
dev_before=$(stat -c '%F %t:%T' /dev/full)
refused "--ring /dev/full --force" "character device, not a regular file: not replaced" \
    "${X[@]}" --ring /dev/full --force
check "/dev/full is still the same character device" test "$(stat -c '%F %t:%T' /dev/full)" = "$dev_before"
check "nothing left beside /dev/full" bash -c '! ls -a /dev | grep "^\.full\.tmp-" >/dev/null'
refused "--ring /dev/full (no --force)" "not replaced" "${X[@]}" --ring /dev/full

mkfifo "$W/fifo"
refused "--ring FIFO --force" "a FIFO, not a regular file" "${X[@]}" --ring "$W/fifo" --force
check "the FIFO stays a FIFO" test -p "$W/fifo"

mkdir "$W/dir"
touch "$W/dir/keep"
refused "--ring folder --force" "a folder, not a regular file" "${X[@]}" --ring "$W/dir" --force
check "the folder stays, with its file" test -d "$W/dir" -a -e "$W/dir/keep"

python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$W/sock"
refused "--ring socket --force" "a socket, not a regular file" "${X[@]}" --ring "$W/sock" --force
check "the socket stays a socket" test -S "$W/sock"

ln -s /dev/full "$W/to-dev"
refused "--ring symlink-to-device --force" "a symlink to a character device" \
    "${X[@]}" --ring "$W/to-dev" --force
check "the link to /dev/full stays as it was" test "$(readlink "$W/to-dev")" = /dev/full -a -c /dev/full

ln -s "$W/nowhere/x.db" "$W/dangling"
refused "--ring dangling symlink --force" "symlink to nothing" "${X[@]}" --ring "$W/dangling" --force
check "the dangling link stays, nothing created" test -L "$W/dangling" -a ! -e "$W/nowhere"

check "nothing left in the work folder" bash -c "! ls -a '$W' | grep tmp- >/dev/null"

echo "not a ring" >"$W/old.db"
refused "--ring regular file (no --force)" "exists (give --force" "${X[@]}" --ring "$W/old.db"
check "the file is unchanged without --force" grep -q "not a ring" "$W/old.db"
check "--ring regular file --force" "${X[@]}" --ring "$W/old.db" --force
check "the regular file was replaced by a ring pfr ls reads" readable_ring "$W/old.db"
check "... a regular file" test -f "$W/old.db" -a ! -L "$W/old.db"

mkdir "$W/real"
echo "not a ring" >"$W/real/target.db"
ln -s real/target.db "$W/link.db"
check "--ring symlink-to-regular --force" "${X[@]}" --ring "$W/link.db" --force
check "the link stays a link to the same target" test -L "$W/link.db" -a "$(readlink "$W/link.db")" = real/target.db
check "its target was replaced by a ring pfr ls reads" readable_ring "$W/real/target.db"
check "... read through the link too" readable_ring "$W/link.db"

check "--ring new file" "${X[@]}" --ring "$W/new.db"
check "the new file is a ring pfr ls reads" readable_ring "$W/new.db"

# ---- -o FILE (flame, export as pprof): written beside a regular target and renamed, or in
# place into a device or pipe, never replacing anything else ----
F=("$PFR" --store "$R" flame --service svc-0 --from $T0 --to $((T0 + 3600)) --format folded)
refused "flame -o /dev/full" "No space left on device" "${F[@]}" -o /dev/full
check "/dev/full is still the character device" test "$(stat -c '%F %t:%T' /dev/full)" = "$dev_before"
refused "flame -o folder" "Is a directory" "${F[@]}" -o "$W/dir"
check "the folder stays, with its file" test -d "$W/dir" -a -e "$W/dir/keep"
refused "flame -o dangling symlink" "cannot write" "${F[@]}" -o "$W/dangling"
check "the dangling link stays" test -L "$W/dangling" -a ! -e "$W/nowhere"
cat "$W/fifo" >"$W/fifo.out" &
reader=$!
check "flame -o FIFO writes into it" "${F[@]}" -o "$W/fifo"
wait $reader
check "the FIFO stays a FIFO, its reader got the flame" bash -c "test -p '$W/fifo' && grep -q ';' '$W/fifo.out'"
echo old >"$W/real/flame.txt"
ln -s real/flame.txt "$W/flame-link.txt"
check "flame -o symlink-to-regular" "${F[@]}" -o "$W/flame-link.txt"
check "the link stays, its target holds the flame" bash -c "test -L '$W/flame-link.txt' && grep -q ';' '$W/real/flame.txt'"
check "export -o regular file" "$PFR" --store "$R" export --service svc-0 --from $T0 --to $((T0 + 3600)) -o "$W/old.db"
check "... replaced by a gzip'd profile" bash -c "head -c2 '$W/old.db' | od -An -tx1 | grep '1f 8b' >/dev/null"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
