/*
 * Disk space (store_space.c), internal to pfr_store: how much of its file system the ring may
 * take now, the spare file that keeps room for the WAL on a full disk, and the counters of what
 * the disk cost. The policy is told in docs/store.md, "Disk space".
 */
#ifndef PFR_STORE_SPACE_H
#define PFR_STORE_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"

/* A writer's state; zero for readers. */
struct store_space {
    pfr_store_reserve reserve; /* the writer's setting */
    char *spare_path;          /* "<db>-spare": room for the WAL when the disk is full */
    uint64_t spare_bytes;      /* its size: the largest WAL seen, from the WAL's budget to an
                                  eighth of the cap */
    bool wal_kept;             /* journal_size_limit is off: the WAL keeps its blocks */
    /* Set by pfr_store_space_plan() before each write transaction. */
    uint64_t db_target;       /* bytes of pages the database may hold after it */
    bool disk_bound;          /* db_target is the disk's, below the cap's */
    bool tight;               /* free space near or below the reserve: shrink in small steps */
    bool starved;             /* hardly any free space: keep the WAL's blocks, make no spare */
    uint64_t reserve_bytes;   /* the reserve as last resolved */
    uint64_t meta_reserve;    /* reserve written to meta by this handle, + 1 (0: not yet) */
    uint64_t dropped_pending; /* chunks refused for space, not yet counted in meta */
};

/* The disk as the ring sees it now. */
struct space_now {
    uint64_t fs_bytes, fs_avail; /* the file system's size; what the ring's user may still use */
    uint64_t files;              /* the ring's files: database, WAL and spare */
    uint64_t shares;             /* the WAL's and the spare file's shares: held or owed */
    uint64_t reserve;            /* bytes kept free */
    uint64_t cap;                /* the cap in force */
    enum pfr_store_cap_reason reason;
};

/* The WAL's share of a cap (cap/16, 64 KiB to 4 MiB). */
uint64_t pfr_store_space_wal_budget(uint64_t max_bytes);

/* A writer's state from its options. 0 or -ENOMEM. */
int pfr_store_space_open(pfr_store *s, const pfr_store_reserve *reserve);
void pfr_store_space_close(pfr_store *s);

/* Measure the file system and the ring's files for a ring capped at max_bytes keeping reserve
 * bytes free (UINT64_MAX: resolve the writer's setting on this file system). 0 or -errno of
 * statvfs. */
int pfr_store_space_measure(pfr_store *s, uint64_t max_bytes, uint64_t reserve,
                            struct space_now *out);

/* Before a write transaction: the database's target (the cap's share or, when less, the disk's)
 * into s's space state. A file system that cannot be measured leaves the cap's. On a disk with
 * hardly any room the WAL keeps its blocks (journal_size_limit off) until there is room again. */
void pfr_store_space_plan(pfr_store *s);

/* Whether a database of db_bytes (its page count at commit) can be checkpointed: the pages past
 * the file's end are written to it only by the checkpoint, which a full disk then fails for
 * good (the WAL can never be reset, so no later transaction fits either). The growth must fit
 * the free space less the WAL's budget. */
bool pfr_store_space_growth_fits(pfr_store *s, uint64_t db_bytes);

/* After a commit: the WAL's size, which sizes the spare file (it must hold a transaction). */
void pfr_store_space_note_wal(pfr_store *s, uint64_t wal_bytes);

/* Make the spare file if it is missing and the disk has room for it (its share is counted in
 * the cap in force, reserve or not); drop it (its room goes to the WAL). Both best effort. */
void pfr_store_space_spare_make(pfr_store *s);
void pfr_store_space_spare_drop(pfr_store *s);

#endif
