#!/bin/sh
# Writes the fuzz seed corpus (corpus/) from progs/uw_nostd.c and progs/uw_main.c: small ELF
# files, each a different path through the builder, and two small hostile ones from make_hostile
# (built with the tests). Run by hand when the builder learns a new case:
#   tests/unwind/make_seeds.sh [gcc [build/tests/unwind/make_hostile]]
set -eu
cc=${1:-gcc}
hostile=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
small="-O2 -fomit-frame-pointer -nostdlib -static -no-pie -Wl,--build-id=none -Wl,-z,noseparate-code"
nostd() { # name, flags...
    name=$1
    shift
    "$cc" $small "$@" -o "$tmp/$name" "$here/progs/uw_nostd.c"
}
nostd eh_frame
nostd drap -DUW_DRAP
nostd signal -DUW_SIGNAL
nostd odd -DUW_ODD
nostd go_note -DUW_GO_NOTE
nostd debug_frame -g -fno-asynchronous-unwind-tables
nostd debug_frame_z -g -gz=zlib -fno-asynchronous-unwind-tables
for f in eh_frame drap signal odd go_note; do
    strip --strip-all "$tmp/$f"
done
for f in debug_frame debug_frame_z; do
    strip --strip-all --keep-section=.debug_frame "$tmp/$f"
done
# a PIE with a lazy PLT and crt1's _start (return address undefined)
"$cc" -O2 -c -o "$tmp/main.o" "$here/progs/uw_main.c"
"$cc" -O2 -fno-omit-frame-pointer -c -o "$tmp/fp.o" "$here/progs/uw_fp.c"
"$cc" -Wl,-z,lazy -Wl,-z,noseparate-code -Wl,--build-id=none -o "$tmp/pie_plt" \
    "$tmp/main.o" "$tmp/fp.o"
strip --strip-all "$tmp/pie_plt"
head -c 64 "$tmp/eh_frame" >"$tmp/header_only"
for f in eh_frame drap signal odd go_note debug_frame debug_frame_z pie_plt header_only; do
    cp "$tmp/$f" "$out/$f"
done
# an .eh_frame_hdr that counts the FDEs, and a .debug_frame compressed 1000 to 1
if [ -n "$hostile" ]; then
    "$hostile" fdes 8 hdr "$out/fdes_hdr"
    "$hostile" bomb 3145728 "$out/bomb"
fi
ls -l "$out"
