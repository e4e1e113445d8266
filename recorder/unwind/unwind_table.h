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
 * besides, whatever the size of the file, and each within a limit (pfr_unwind_limits): libdw's
 * caches are dropped every few dozen FDEs, and .eh_frame is read a window at a time
 * (unwind_image.h). ClickHouse's 559 MB library (680k FDEs, 4.7M rows) takes 48 MiB. A caller that
 * can only load so many rows passes that cap (pfr_unwind_table_build_capped()): a larger table
 * stops there, and one with more FDEs than a quarter of the cap has its rows counted before they
 * are kept, so that it never holds them (ClickHouse's under 2M rows: 11 MiB, 0.5 s).
 *
 * Errors: functions return 0 or a negative errno and put a sentence in err; they never print.
 * Ownership: pfr_unwind_table_build() fills *out, which the caller frees with
 * pfr_unwind_table_free(); the input descriptor stays the caller's.
 */
#ifndef PFR_UNWIND_TABLE_H
#define PFR_UNWIND_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_profile.h"

/* The version of the rows a file gives: raise it whenever a change of the builder changes the
 * rows of any file, so that tables kept on disk by an older builder (unwind_cache.h) are built
 * again rather than loaded. */
#define PFR_UNWIND_ROWS_VERSION 1u

/* Flags of pfr_unwind_table_build(). */
/* A Go program's .debug_frame too. By default a Go program gets only the rows of its .eh_frame,
 * which covers the C code a cgo program links (Go's own code keeps frame pointers). */
#define PFR_UNWIND_BUILD_GO 1u

typedef struct pfr_unwind_table_stats {
    uint64_t fdes;        /* FDEs read */
    uint64_t rows_in;     /* rows libdw described, before merging */
    uint64_t unsupported; /* rows made PFR_UW_NONE: a rule the sampler cannot follow */
    int debug_frame;      /* 1 if the rows came from .debug_frame (no .eh_frame) */
    uint64_t cpu_ns;      /* CPU time of the build (not of the caller's work in its pauses) */
} pfr_unwind_table_stats;

typedef struct pfr_unwind_table {
    uint64_t base;               /* file virtual address of row pc 0 */
    uint64_t delta;              /* p_vaddr - p_offset of the executable segment */
    struct pfr_unwind_row *rows; /* sorted by pc, owned */
    size_t nrows;
    pfr_unwind_table_stats stats;
} pfr_unwind_table;

/* What one build may cost, whatever the file says: checked before the memory or time is spent
 * (declared sizes and counts), or as it goes (CPU time). A file over a limit is refused with
 * the errno named; pfr_unwind_refusal() tells the reason. */
typedef struct pfr_unwind_limits {
    size_t max_rows;             /* rows of the table: -E2BIG past it (0: no cap) */
    uint64_t max_fdes;           /* FDEs read from .eh_frame, and a quarter of it from .debug_frame
                                  * (libdw keeps each of those, ~80 bytes); CIEs count too. Past it
                                  * -EOVERFLOW, before it is read past when .eh_frame_hdr says so */
    uint64_t max_held_bytes;     /* of the file held whole in memory: its headers and the sections
                                  * copied (all but .eh_frame, read a window at a time), and the
                                  * sections libdw would inflate (their declared sizes, added up,
                                  * before any is). -EFBIG past it */
    uint64_t max_eh_frame_bytes; /* .eh_frame's size: -EFBIG past it */
    uint64_t max_cpu_ns;         /* CPU time of the thread building: -ETIME past it (0: none) */
    uint64_t max_bytes;          /* the build's own memory that grows with the file (its FDE list
                                  * and its rows): -ENOBUFS before it passes it (0: no limit).
                                  * Not the file's fault: the room a caller's memory budget gives
                                  * the build now. A table that would pass it is counted first, its
                                  * rows never paid */
    unsigned cpu_share;          /* percent of a core a build takes on average: past it, it sleeps
                                  * in proportion to the CPU it used (0 or 100: never sleeps) */
    const atomic_bool *cancel;   /* set (by another thread): the build stops, -ECANCELED, within
                                  * a slice (NULL: never) */
    /* Called between the build's steps (every few hundred microseconds of its work, with no
     * lock held and nothing of the build's shared): the caller may do other work on this thread
     * meanwhile, such as a smaller file's build, and returns true if it did. The CPU time of that
     * work counts neither in this build's budget nor in its share. NULL: never. */
    bool (*yield)(void *ctx);
    void *yield_ctx;
} pfr_unwind_limits;

/* The defaults, which real files pass: libLLVM-15 (98k FDEs, 5 MB of .eh_frame, 0.98M rows,
 * 0.2 s), ClickHouse's library (680k FDEs, 35 MB, 4.7M rows: over the rows only). The table
 * of max_fdes FDEs takes 16 MiB to build, of max_rows rows 16 MiB to keep. */
#define PFR_UNWIND_MAX_ROWS_DEFAULT     (2u << 20)
#define PFR_UNWIND_MAX_FDES_DEFAULT     (1u << 20)
#define PFR_UNWIND_MAX_HELD_DEFAULT     (32ull << 20)
#define PFR_UNWIND_MAX_EH_FRAME_DEFAULT (256ull << 20)
#define PFR_UNWIND_MAX_CPU_NS_DEFAULT   (5ull * 1000000000)

/* The defaults: the limits above, no CPU share (a tool builds as fast as it can). */
void pfr_unwind_limits_default(pfr_unwind_limits *lim);

/* Why a build was refused, from its return code: */
enum pfr_unwind_refusal {
    PFR_UW_REFUSED_TOO_BIG,       /* -EFBIG: a section, what would be held, or the code's span */
    PFR_UW_REFUSED_TOO_MANY_FDES, /* -EOVERFLOW */
    PFR_UW_REFUSED_TOO_MANY_ROWS, /* -E2BIG */
    PFR_UW_REFUSED_TIME_BUDGET,   /* -ETIME */
    PFR_UW_REFUSED_BAD_FILE,      /* -ENOEXEC: not a readable x86-64 ELF file, or a hostile one */
    PFR_UW_REFUSALS
};

/* The refusal of a build's return code, or -1 (0, no call-frame information, I/O, memory). */
int pfr_unwind_refusal(int rc);

/* A refusal's name for metrics and logs ("too_big", ...); "" out of range. */
const char *pfr_unwind_refusal_name(int refusal);

/* Build the table of the ELF file open at fd (read with pread; the offset is not moved), within
 * lim (NULL: the defaults).
 * @return 0; -ENOEXEC not an x86-64 ELF file (or a truncated/corrupt one); -ENOENT no
 * call-frame information; -ENOTSUP a Go program with no .eh_frame (without
 * PFR_UNWIND_BUILD_GO) or executable segments whose p_vaddr - p_offset differ; -EFBIG code
 * spans 4 GiB or more, or a size past lim; -E2BIG more rows than lim->max_rows (no table);
 * -EOVERFLOW more FDEs than lim->max_fdes; -ETIME past lim->max_cpu_ns; -ECANCELED
 * lim->cancel was set; -ENOBUFS past lim->max_bytes; -EBADF, -EIO the
 * descriptor cannot be read; -ENOMEM. */
int pfr_unwind_table_build_limited(int fd, unsigned flags, const pfr_unwind_limits *lim,
                                   pfr_unwind_table *out, char *err, size_t errlen);

/* Same, within the default limits. */
int pfr_unwind_table_build(int fd, unsigned flags, pfr_unwind_table *out, char *err, size_t errlen);

/* Same, within the default limits but max_rows (0: the default). */
int pfr_unwind_table_build_capped(int fd, unsigned flags, size_t max_rows, pfr_unwind_table *out,
                                  char *err, size_t errlen);

/* Same, from a file image in memory (for the vDSO, tests and the fuzz target); data stays the
 * caller's. lim NULL: the defaults. */
int pfr_unwind_table_build_mem_limited(const void *data, size_t size, unsigned flags,
                                       const pfr_unwind_limits *lim, pfr_unwind_table *out,
                                       char *err, size_t errlen);
int pfr_unwind_table_build_mem(const void *data, size_t size, unsigned flags, pfr_unwind_table *out,
                               char *err, size_t errlen);

void pfr_unwind_table_free(pfr_unwind_table *t);

/* The row covering a file virtual address, or NULL (below the first row): what the sampler's
 * search does, for tests and tools. */
const struct pfr_unwind_row *pfr_unwind_table_find(const pfr_unwind_table *t, uint64_t vaddr);

#endif
