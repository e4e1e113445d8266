/*
 * unwind_table: turns an ELF file's call-frame information (.eh_frame, else .debug_frame) into
 * the sampler's compact unwind rows (struct pfr_unwind_row in cpu_profile.h), x86-64 rules.
 *
 * The rows come from elfutils' CFI API (dwarf_getcfi_elf / dwarf_cfi_addrframe /
 * dwarf_frame_cfa / dwarf_frame_register), not from an interpreter of our own: the only
 * decoding done here is finding where each FDE starts. Rows are sorted by pc, each valid up to
 * the next one; a gap between FDEs, and the end of the last, are PFR_UW_NONE rows; neighbouring
 * rows with the same rule are merged.
 *
 * Memory: a build holds its FDEs (16 bytes each), its rows (8 bytes each) and about 1 MiB
 * besides, whatever the size of the file: libdw's caches are dropped every few dozen FDEs, and
 * .eh_frame is read a window at a time (unwind_image.h). ClickHouse's 559 MB library (680k FDEs,
 * 4.7M rows) takes 48 MiB. A caller that can only load so many rows passes that cap
 * (pfr_unwind_table_build_capped()): a larger table stops there, and one with more FDEs than a
 * quarter of the cap has its rows counted before they are kept, so that it never holds them
 * (ClickHouse's under 2M rows: 11 MiB, 0.5 s).
 *
 * Errors: functions return 0 or a negative errno and put a sentence in err; they never print.
 * Ownership: pfr_unwind_table_build() fills *out, which the caller frees with
 * pfr_unwind_table_free(); the input descriptor stays the caller's.
 */
#ifndef PFR_UNWIND_TABLE_H
#define PFR_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_profile.h"

/* Flags of pfr_unwind_table_build(). */
/* A Go program's .debug_frame too. By default a Go program gets only the rows of its .eh_frame,
 * which covers the C code a cgo program links (Go's own code keeps frame pointers). */
#define PFR_UNWIND_BUILD_GO 1u

typedef struct pfr_unwind_table_stats {
    uint64_t fdes;        /* FDEs read */
    uint64_t rows_in;     /* rows libdw described, before merging */
    uint64_t unsupported; /* rows made PFR_UW_NONE: a rule the sampler cannot follow */
    int debug_frame;      /* 1 if the rows came from .debug_frame (no .eh_frame) */
} pfr_unwind_table_stats;

typedef struct pfr_unwind_table {
    uint64_t base;               /* file virtual address of row pc 0 */
    uint64_t delta;              /* p_vaddr - p_offset of the executable segment */
    struct pfr_unwind_row *rows; /* sorted by pc, owned */
    size_t nrows;
    pfr_unwind_table_stats stats;
} pfr_unwind_table;

/* Build the table of the ELF file open at fd (read with pread; the offset is not moved).
 * @return 0; -ENOEXEC not an x86-64 ELF file (or a truncated/corrupt one); -ENOENT no
 * call-frame information; -ENOTSUP a Go program with no .eh_frame (without
 * PFR_UNWIND_BUILD_GO) or executable segments whose p_vaddr - p_offset differ; -EFBIG code
 * spans 4 GiB or more; -EBADF, -EIO the descriptor cannot be read; -ENOMEM. */
int pfr_unwind_table_build(int fd, unsigned flags, pfr_unwind_table *out, char *err, size_t errlen);

/* Same, giving up as soon as the table passes max_rows rows (0: no cap): -E2BIG, with no table,
 * for a file whose table could never be loaded. A table of max_rows rows or fewer is the same
 * as pfr_unwind_table_build()'s. */
int pfr_unwind_table_build_capped(int fd, unsigned flags, size_t max_rows, pfr_unwind_table *out,
                                  char *err, size_t errlen);

/* Same, from a file image in memory (for tests and the fuzz target); data stays the caller's. */
int pfr_unwind_table_build_mem(const void *data, size_t size, unsigned flags, pfr_unwind_table *out,
                               char *err, size_t errlen);

void pfr_unwind_table_free(pfr_unwind_table *t);

/* The row covering a file virtual address, or NULL (below the first row): what the sampler's
 * search does, for tests and tools. */
const struct pfr_unwind_row *pfr_unwind_table_find(const pfr_unwind_table *t, uint64_t vaddr);

#endif
