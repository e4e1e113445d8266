/*
 * unwind_cache: unwind tables kept on disk, so that a table evicted from the sampler's map (or
 * built before a restart) is read back in milliseconds instead of built again in seconds
 * (libclang-cpp: 1.0M rows, 1-2 s of CPU; a busy build host evicted and rebuilt such tables
 * 152 times in 4 minutes).
 *
 * One file per table in a directory of the recorder's own (created 0700; one owned by another
 * user, or writable by group or others, is refused: its tables go straight into the sampler's
 * maps). A file is named by a hash of its key and holds the whole key, which a lookup compares:
 *   - the file's GNU build-id, else its (dev, ino); and always its size and mtime, so that a
 *     file replaced in place never gets the table of the one before;
 *   - the builder's flags and PFR_UNWIND_ROWS_VERSION, and this file format's version.
 * Then its rows, in chunks of PFR_UNWIND_CACHE_CHUNK_ROWS, each LZ4-compressed (pc deltas, then
 * rules), and a hash of the header and one of the rows. A file is written under a temporary
 * name and renamed (atomic); nothing is synced: a file torn by a crash fails its checks, is
 * counted in bad_files, removed, and its table built again.
 *
 * Bound: the files' bytes stay within max_bytes; past it the least recently used go first (a
 * hit sets its file's mtime: the order survives restarts). A full disk, a read-only or
 * unwritable directory: the write fails and is counted (write_errors); lookups go on.
 * Disk room: the cache is the first to do without it, never the ring. Before a table is written,
 * the file system must keep what the daemon's keep says (pfr_disk_keep.h: on the ring's file
 * system its reserve and cap, anywhere 5 %) past the file's largest size; if not, the least
 * recently used files go first (room_evictions), and if still short the table is not written
 * (no_room).
 *
 * Memory: a lookup holds the rows (8 bytes each) and one chunk's buffers (~1 MiB, less for a
 * table of fewer rows than a chunk), and asks the memory budget for them first, as a brief cost
 * (pfr_membudget_allow_brief: the caller hands the rows to the kernel and frees them); a write
 * holds one chunk's buffers.
 *
 * Threads: none of its own; a handle is used by one thread at a time (the unwinder's).
 * Errors: functions return 0 or a negative errno; the sentence of the last error is kept
 * (pfr_unwind_cache_last_error()); nothing is printed.
 * Ownership: pfr_unwind_cache_open() returns a handle freed by pfr_unwind_cache_close(); a table
 * read is the caller's (pfr_unwind_table_free()).
 */
#ifndef PFR_UNWIND_CACHE_H
#define PFR_UNWIND_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind_table.h"

struct pfr_membudget;
struct pfr_disk_keep;
typedef struct pfr_unwind_cache pfr_unwind_cache;

/* Rows per compressed chunk (512 KiB of rows). */
#define PFR_UNWIND_CACHE_CHUNK_ROWS (64u << 10)
/* Tables worth a file: this many rows, or a build of this much CPU time. Smaller ones are built
 * again in about the time a file takes to read (a program of a few hundred functions). A small
 * library's table (libz, libbpf, bash: 2k-20k rows, milliseconds to build) is kept too: on a busy
 * host it is evicted and built again many times an hour. */
#define PFR_UNWIND_CACHE_MIN_ROWS   (2u << 10)
#define PFR_UNWIND_CACHE_MIN_CPU_NS (2 * 1000000ull)
#define PFR_UNWIND_CACHE_MAX_ID     64

/* What a table is kept under. */
typedef struct pfr_unwind_cache_key {
    uint8_t id[PFR_UNWIND_CACHE_MAX_ID]; /* GNU build-id */
    uint32_t id_len;                     /* 0: none, and dev, ino name the file */
    uint64_t dev, ino;                   /* 0 with a build-id */
    uint64_t size;
    int64_t mtime_ns;
    uint32_t flags; /* the builder's (pfr_unwind_table_build()) */
} pfr_unwind_cache_key;

typedef struct pfr_unwind_cache_stats {
    uint64_t hits;         /* tables read back */
    uint64_t misses;       /* lookups with no file (or another key's, or an older format's) */
    uint64_t bad_files;    /* files that failed their checks (torn, truncated, altered): removed */
    uint64_t no_memory;    /* lookups the memory budget refused */
    uint64_t writes;       /* tables written */
    uint64_t write_errors; /* tables not written: a full disk, an unwritable directory */
    uint64_t no_room;      /* tables not written: the free space is the ring's (keep) */
    uint64_t evictions;    /* files removed to stay within the bound, or for the disk's room */
    uint64_t room_evictions; /* of evictions, for the disk's room */
    uint64_t bytes;          /* of the files now */
    uint64_t files;
    uint64_t max_bytes; /* the bound */
} pfr_unwind_cache_stats;

/* Open (and create, 0700, with its parent) the directory dir, its files within max_bytes (at
 * least 1 MiB). Files left by a write cut short are removed, and the directory is brought within
 * the bound. membudget (not owned, may be NULL) is asked before a lookup holds a table's rows.
 * keep (copied; NULL: the floor only) is the free space writes leave to the ring.
 * @return 0; -EPERM a directory of another user or writable by others; -errno of mkdir or open;
 * -ENOMEM. err says why. */
int pfr_unwind_cache_open(const char *dir, uint64_t max_bytes, struct pfr_membudget *membudget,
                          const struct pfr_disk_keep *keep, pfr_unwind_cache **out, char *err,
                          size_t errlen);
void pfr_unwind_cache_close(pfr_unwind_cache *c);

/* The key of the ELF file open at fd: its build-id (read within the symbolizer's limits), else its
 * (dev, ino); its size and mtime. @return 0, or -errno of fstat, -ENOEXEC not a regular file. */
int pfr_unwind_cache_key_fd(int fd, unsigned flags, pfr_unwind_cache_key *out);

/* The table kept under key, into *out (a build's table, but its stats, which are zero), if it
 * has at most max_rows rows. @return 0 (a hit); -ENOENT (a miss: no file, another key, another
 * version, more rows than max_rows); -EBADMSG (a file that failed its checks: removed);
 * -ENOBUFS (the memory budget refused the rows); -ENOMEM. */
int pfr_unwind_cache_get(pfr_unwind_cache *c, const pfr_unwind_cache_key *key, size_t max_rows,
                         pfr_unwind_table *out);

/* Keep t under key (replacing what was), evicting the least recently used files past the
 * bound. @return 0; -EFBIG larger than the whole bound (not kept); -EDQUOT the file system's
 * free space is the ring's (keep), even with every file of the cache removed (not kept, counted
 * in no_room); -errno of the write (counted in write_errors; the sentence in
 * pfr_unwind_cache_last_error()). */
int pfr_unwind_cache_put(pfr_unwind_cache *c, const pfr_unwind_cache_key *key,
                         const pfr_unwind_table *t);

void pfr_unwind_cache_stats_get(const pfr_unwind_cache *c, pfr_unwind_cache_stats *out);
const char *pfr_unwind_cache_last_error(const pfr_unwind_cache *c);

/* The file layer, for the fuzz target and tests: read a cache file open at fd, its key checked
 * against key (NULL: any), at most max_rows rows. *key_out (may be NULL) gets the file's key.
 * @return 0; -ENOENT another key or version; -E2BIG more rows than max_rows; -EBADMSG a file
 * that fails its checks; -ENOMEM; -EIO. Write one: 0 or -errno. */
int pfr_unwind_cache_read_fd(int fd, const pfr_unwind_cache_key *key, size_t max_rows,
                             pfr_unwind_table *out, pfr_unwind_cache_key *key_out);
int pfr_unwind_cache_write_fd(int fd, const pfr_unwind_cache_key *key, const pfr_unwind_table *t);

#endif
