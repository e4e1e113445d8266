#!/bin/sh
# make_many_fdes.sh CC N OUT: a static ELF file of N small functions, each with an FDE of three
# rows, for the tests of large tables (the row cap, the .eh_frame window, libdw's caches
# recycled). Function i is at uw_many_first + 4 * i (push %rbp; nop; pop %rbp; ret), its rows:
#   +0 CFA = rsp + 8;  +1 CFA = rsp + 16, rbp at CFA - 16;  +3 CFA = rsp + 8
# so the table holds 2 * N + 2 rows (a function's first row extends the last one's).
set -eu
cc=$1
n=$2
out=$3
awk -v n="$n" 'BEGIN {
    print ".text\n.globl _start\n_start:\n\thlt\n.globl uw_many_first\nuw_many_first:"
    for (i = 0; i < n; i++) {
        if (i == n - 1)
            print ".globl uw_many_last\nuw_many_last:"
        print ".cfi_startproc\n\tpush %rbp\n.cfi_adjust_cfa_offset 8\n.cfi_offset %rbp, -16\n" \
              "\tnop\n\tpop %rbp\n.cfi_adjust_cfa_offset -8\n.cfi_restore %rbp\n\tret\n.cfi_endproc"
    }
}' >"$out.s"
"$cc" -nostdlib -static -no-pie -Wl,--build-id=none -o "$out" "$out.s"
rm -f "$out.s"
