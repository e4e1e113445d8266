/*
 * unwinder: keeps the sampler's unwind tables. The sampler asks for the table of a file it
 * meets without one (PFR_EV_UNWIND); a thread of the unwinder opens that file through the
 * asking process, builds its rows (unwind_table.h) and loads them into the sampler's maps:
 * unwind_rows (one array, a file's rows contiguous) and unwind_files (dev, ino -> its place).
 * A table is built once per file and shared by every process that maps it.
 *
 * Bounds: unwind_rows has a fixed number of rows (the configured cap); when a new table does
 * not fit, the tables the sampler has not used for a couple of seconds are evicted, least
 * recently used first, those the cache on disk holds (a read brings them back) before those
 * only a build does unless these have been idle a minute longer (their next use asks again).
 * Tables in use are not traded for one
 * another: when they fill the cap, the new file gets 0 rows for a while (30 s), then is asked
 * again.
 * A file with no usable table (none in the file, a Go program, a corrupt file, a table larger
 * than the whole cap, a file past the builder's limits) gets an entry of 0 rows: walked by frame
 * pointers, not asked again. A table larger than the cap is given up as soon as it passes it
 * (counted in no_table). Builds run within unwind_table.h's default limits, a large file's at
 * most opts.cpu_share of a core (a small file's at full speed: it is short, and its process's
 * stacks stay partial until it is in); a refused file is counted by reason and told to
 * opts.on_refused.
 *
 * Order: the queued file of the smallest mapping is built first; and a small file never waits
 * behind a large one. A large build (seconds, spread over time by its CPU share) pauses between
 * its steps whenever small files are queued, and the thread builds and loads theirs meanwhile
 * (interleaved), each within tighter limits (PFR_UNWINDER_SMALL_*) and only while the memory
 * budget has room for both builds; a small file past those waits its turn (deferred). A small
 * file's build, a nested one too, pauses so for files of a mapping at most an eighth of its own
 * (a new program's table behind libstdc++'s), two levels deep at most. One thread: one large
 * build's memory and CPU share at a time, plus the small builds nested in its pause.
 *
 * Tables kept on disk (opts.cache_dir, unwind_cache.h): a file's table is looked up there before
 * it is built (also while a large build pauses, whatever the small limits: a read holds only the
 * rows), and a table worth it (PFR_UNWIND_CACHE_MIN_ROWS rows, or as much CPU time) is
 * written there once built; so a table evicted from the map, or built before a restart, comes
 * back in milliseconds. The directory is opened, read and written on the unwinder's thread only.
 * A directory that cannot be used, a write that fails: told to opts.on_cache_error (the first
 * time each) and counted; tables are built as without it.
 *
 * Errors: functions return 0 or a negative errno with a sentence in err; nothing is printed.
 * Ownership: pfr_unwinder_new() returns a handle freed by pfr_unwinder_free(); the map
 * descriptors stay the caller's (the sampler's) and must outlive the handle.
 * Threads: pfr_unwinder_request() and pfr_unwinder_stats_get() may be called from any thread.
 */
#ifndef PFR_UNWINDER_H
#define PFR_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_profile.h"
#include "unwind_cache.h"
#include "unwind_table.h"

typedef struct pfr_unwinder pfr_unwinder;
struct pfr_fsguard;

/* A file whose table was refused (unwind_table.h's limits, or a bad file), for the caller's log:
 * called once per build, on the unwinder's thread. */
typedef struct pfr_unwind_refused {
    uint32_t pid; /* the process that asked */
    uint64_t dev, ino;
    const char *path; /* as the recorder opened it (else as /proc names it) */
    int reason;       /* enum pfr_unwind_refusal */
    const char *why;  /* the builder's sentence */
} pfr_unwind_refused;

/* A file whose table was built and loaded, for the caller's debug log: how long its build took
 * and how long its process's stacks waited for it (called on the unwinder's thread). */
struct pfr_disk_keep;

typedef struct pfr_unwind_built {
    uint32_t pid; /* the process that asked */
    uint64_t dev, ino;
    const char *path; /* as the recorder opened it ("[vdso]" for the vDSO) */
    uint32_t rows;
    double build_ms;       /* its own build, pauses for other files not counted */
    double waited_ms;      /* from the ask to the table in place */
    bool small;            /* built in the small files' lane */
    bool cached;           /* read from the cache on disk, not built */
    bool not_kept_no_room; /* built, not kept on disk: its file system's room is the ring's */
} pfr_unwind_built;

typedef struct pfr_unwinder_opts {
    uint32_t max_rows;         /* rows unwind_rows holds (its max_entries) */
    unsigned build_flags;      /* pfr_unwind_table_build() flags */
    const char *proc;          /* "/proc" unless a test says otherwise */
    unsigned no_room_retry_ms; /* how long a file refused for want of room keeps 0 rows before
                                * it is asked for again; 0 = 30 s */
    unsigned cpu_share;        /* percent of a core a build takes on average (unwind_table.h);
                                * 0 = PFR_UNWINDER_CPU_SHARE */
    void (*on_refused)(void *ctx, const pfr_unwind_refused *r); /* NULL: none */
    void (*on_built)(void *ctx, const pfr_unwind_built *b);     /* NULL: none */
    void *ctx;
    struct pfr_fsguard *fsguard;     /* files on remote file systems are read only as copies made
                                        by its workers; NULL: opened directly. Not owned. */
    struct pfr_membudget *membudget; /* no build while the recorder is over its memory budget
                                        (counted in no_room); NULL: none. Not owned. */
    bool one_lane;         /* no small file built while a large build is under way: the order before
                            * issue 30 (benchmarks and tests compare the two) */
    const char *cache_dir; /* tables kept on disk there (copied); NULL or "": not kept */
    uint64_t cache_bytes;  /* its bound (unwind_cache.h) */
    /* the free space the cache's writes leave to the ring (pfr_disk_keep.h; copied); NULL:
     * the floor only */
    const struct pfr_disk_keep *cache_keep;
    /* The cache could not be opened (it is then off), or its first write failed: why, once
     * each, on the unwinder's thread. NULL: not told. */
    void (*on_cache_error)(void *ctx, const char *why);
    /* Counted up after every change of unwind_files (the sampler's uw_files_gen: its memo of
     * mappings trusts no entry made before); NULL: none. Not owned. */
    volatile uint32_t *files_gen;
} pfr_unwinder_opts;

/* A build takes half a core at most on average (it sleeps as long as it ran, in 10 ms slices):
 * the recorder's own threads keep a core's other half to end intervals on time even on a
 * one-CPU host, and the host's programs are not run behind a recorder busy with one hostile
 * file (the thread's nice value weighs it only against the recorder's others and lower). Real
 * tables take twice as long to come: libLLVM-15's 0.3 s, 0.6 s. */
#define PFR_UNWINDER_CPU_SHARE 50u

/* A small file: a mapping of at most this many bytes (a program, libc, ld.so, python3: 0.2 to 3
 * MB; libLLVM, cc1, chromium, node: 20 to 240 MB). Its build may run while a larger one pauses,
 * within these limits (checked before they are paid: past them it waits for the larger build,
 * then is built within the usual ones). python3.11: 0.4 MB of .eh_frame, 10k FDEs. */
#define PFR_UNWINDER_SMALL_MAP      (8u << 20)
#define PFR_UNWINDER_SMALL_EH_FRAME (1u << 20)
#define PFR_UNWINDER_SMALL_FDES     (32u << 10)
#define PFR_UNWINDER_SMALL_HELD     (8u << 20)

typedef struct pfr_unwinder_stats {
    uint64_t requests;    /* files asked for by the sampler */
    uint64_t queue_full;  /* requests dropped (queue full); the sampler asks again */
    uint64_t tables;      /* tables built and loaded */
    uint64_t no_table;    /* files given 0 rows: no call-frame information, Go, or larger than
                           * the cap (-E2BIG) */
    uint64_t no_room;     /* files given 0 rows for a while: the tables in use fill the cap */
    uint64_t bad_files;   /* files that could not be parsed (corrupt, truncated, not x86-64) */
    uint64_t open_failed; /* files that could not be opened (process gone, no permission) */
    uint64_t refused[PFR_UW_REFUSALS]; /* files refused, by reason (enum pfr_unwind_refusal); each
                                        * is counted in bad_files or no_table too */
    uint64_t evictions;                /* tables evicted to make room */
    uint64_t build_ns;                 /* time spent building and loading tables */
    uint64_t build_max_ns;             /* the longest */
    uint64_t rows;                     /* rows in use (the tables' indexes included) */
    uint64_t max_rows;                 /* the cap */
    uint64_t files;                    /* files with an entry (a table or 0 rows) */
    uint64_t files_with_rows;
    uint64_t interleaved;   /* small files built while a larger build paused */
    uint64_t deferred;      /* small files left for after the larger build: past the small limits,
                             * or the memory budget had no room for both */
    uint64_t small_files;   /* small files handled (any outcome) */
    uint64_t small_wait_ns; /* from their requests to their entries in unwind_files, added up */
    uint64_t small_wait_max_ns;   /* the longest */
    bool cache_enabled;           /* the cache on disk is open */
    pfr_unwind_cache_stats cache; /* its figures */
} pfr_unwinder_stats;

/* Start the unwinder over the sampler's maps (descriptors of unwind_rows, unwind_files and
 * unwind_asked). @return 0 or -errno (-ENOMEM, thread creation). */
int pfr_unwinder_new(const pfr_unwinder_opts *opts, int rows_fd, int files_fd, int asked_fd,
                     pfr_unwinder **out, char *err, size_t errlen);

/* Queue a request from the sampler; never blocks on a build. */
void pfr_unwinder_request(pfr_unwinder *u, const struct pfr_unwind_req *req);

/* Wait until every request queued so far is handled (tests, the drain of a short run). */
void pfr_unwinder_sync(pfr_unwinder *u);

void pfr_unwinder_stats_get(pfr_unwinder *u, pfr_unwinder_stats *out);

/* Stop the thread and free the handle (the maps' contents are left as they are). */
void pfr_unwinder_free(pfr_unwinder *u);

#endif
