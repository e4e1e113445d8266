/*
 * pfr_disk_keep: the free space that the recorder's files other than the ring (its unwind
 * cache, its copies of remote files) leave on their file system. They are the first to do
 * without room, never the ring: on a small file system the ring's cap in force comes from the
 * free space above its reserve (docs/store.md, "Disk space"), and a cache that took that room
 * would hold the ring at its floor.
 *
 * Kept free, after the write:
 *   - on the ring's file system (the same st_dev): the ring's reserve plus its whole cap. The
 *     room the ring may grow into is counted as the ring's whatever it holds now: no reading of
 *     the store's files, and on the safe side (on a file system smaller than that, nothing);
 *   - on any file system: the larger of PFR_DISK_KEEP_PERCENT of its size and the ring's
 *     reserve.
 * The daemon fills one at start (pfr_disk_keep_find_ring(), and the ring's settings); a module that
 * writes such files asks pfr_disk_keep_fits() before each write. Nothing here is global; nothing is
 * printed.
 */
#ifndef PFR_DISK_KEEP_H
#define PFR_DISK_KEEP_H

#include <stdbool.h>
#include <stdint.h>

#define PFR_DISK_KEEP_PERCENT 5.0

typedef struct pfr_disk_keep {
    bool ring_known;       /* ring_dev is the ring's file system */
    uint64_t ring_dev;     /* its st_dev */
    uint64_t ring_reserve; /* the ring's reserve there, in bytes (resolved by the daemon) */
    uint64_t ring_cap;     /* the ring's cap (max_store_bytes) */
} pfr_disk_keep;

/* The file system of a ring at ring_path (its file, which may not exist yet: the nearest folder
 * that does names it) into keep->ring_dev and *fs_bytes (its size: the daemon resolves the
 * ring's reserve from it). @return true; false nothing of the path could be stat()ed (keep's
 * ring_known false, *fs_bytes 0: only the floor applies). */
bool pfr_disk_keep_find_ring(pfr_disk_keep *keep, const char *ring_path, uint64_t *fs_bytes);

/* May bytes more be written on the file system of the file or directory open at fd, keep
 * (NULL: the floor only) left free? @return 0 yes (also when the file system cannot be
 * measured: the disk decides, as before); -EDQUOT no, *short_by (may be NULL) = the bytes
 * missing. */
int pfr_disk_keep_fits(const pfr_disk_keep *keep, int fd, uint64_t bytes, uint64_t *short_by);

#endif
