/*
 * Disk space (layer 2, internal): measures the file system and the ring's files, applies the
 * space policy's decision (store_policy.h) before each write transaction, and keeps the spare
 * file that holds room for the WAL on a full disk. The policy is told in docs/store.md, "Disk
 * space".
 */
#ifndef PFR_STORE_SPACE_H
#define PFR_STORE_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_db.h"
#include "store_policy.h"

/* A handle's disk state; a reader uses only the paths and the settings. */
struct store_space {
    char *db_path, *wal_path, *spare_path; /* "<db>", "<db>-wal", "<db>-spare" */
    uint64_t max_bytes;                    /* the configured cap */
    bool read_only;
    pfr_store_reserve reserve; /* the writer's setting */
    uint64_t wal_seen; /* the largest transaction's WAL seen (a restarted writer: the spare's) */
    uint64_t wal_last[16];   /* the last transactions' WAL, a ring (0: none yet) */
    unsigned wal_next;       /* where the next goes in wal_last */
    uint64_t room_held;      /* the ring's files at their largest since the disk filled (0: not) */
    bool wal_kept;           /* the disk is starved: the WAL keeps one transaction's blocks */
    uint64_t wal_limit;      /* journal_size_limit as last set (0: not yet) */
    uint64_t wal_budget_set; /* the budget wal_autocheckpoint was last set from */
    /* Set by pfr_st_space_plan() before each write transaction. */
    struct store_policy_out now;
    uint64_t reserve_bytes;   /* the reserve as last resolved */
    uint64_t meta_reserve;    /* reserve written to meta by this handle, + 1 (0: not yet) */
    uint64_t dropped_pending; /* chunks refused for space, not yet counted in meta */
};

/* The disk as the ring sees it now. */
struct space_now {
    uint64_t fs_bytes, fs_avail; /* the file system's size; what the ring's user may still use */
    uint64_t reserve;            /* bytes kept free */
    uint64_t cap;                /* the cap in force */
    enum pfr_store_cap_reason reason;
};

/* A handle's state for the ring at path. 0 or -ENOMEM. */
int pfr_st_space_open(struct store_space *sp, const char *path, uint64_t max_bytes, bool read_only,
                      const pfr_store_reserve *reserve);
void pfr_st_space_close(struct store_space *sp);

/* Measure the file system and the ring's files for a ring capped at max_bytes keeping reserve
 * bytes free (UINT64_MAX: resolve the writer's setting on this file system), and decide. 0 or
 * -errno of statvfs. */
int pfr_st_space_measure(struct store_space *sp, uint64_t max_bytes, uint64_t reserve,
                         struct space_now *now, struct store_policy_out *out);

/* Before a write transaction: the policy's decision for now into sp->now. A file system that
 * cannot be measured leaves the configured cap's. On a disk with hardly any room the WAL keeps
 * its blocks (journal_size_limit off) until there is room again. */
void pfr_st_space_plan(struct store_space *sp, struct store_db *sql);

/* The WAL's size after a checkpoint (journal_size_limit): the budget in force, or its share of
 * the cap (the peak the database's target counts it at) when less. */
uint64_t pfr_st_space_wal_limit(const struct store_space *sp);

/* Whether a database of db_bytes (its page count at commit) can be checkpointed: the pages past
 * the file's end are written to it only by the checkpoint, which a full disk then fails for
 * good (the WAL can never be reset, so no later transaction fits either). The growth must fit
 * the free space less the WAL's budget. */
bool pfr_st_space_growth_fits(struct store_space *sp, uint64_t db_bytes);

/* The WAL file's bytes. */
uint64_t pfr_st_space_wal_file(const struct store_space *sp);

/* On a full disk: the bytes the WAL lacks for the largest recent transaction (its file and the
 * free space short of it), at most half of what it could take for a move of pages (its file and
 * the free space). 0 when the disk is not full or cannot be measured. */
uint64_t pfr_st_space_wal_deficit(struct store_space *sp);

/* After a commit: the transaction's WAL bytes, which size the spare file and, on a full disk,
 * the WAL's blocks kept (it must hold a transaction). */
void pfr_st_space_note_wal(struct store_space *sp, uint64_t wal_bytes);

/* Make the spare file if it is missing and the disk has room for it (its share is counted in
 * the cap in force, reserve or not); drop it (its room goes to the WAL). Both best effort. */
void pfr_st_space_spare_make(struct store_space *sp);
void pfr_st_space_spare_drop(struct store_space *sp);
/* Whether the spare file is there: the ring's room on a disk someone else fills. */
bool pfr_st_space_spare_held(const struct store_space *sp);

/* The database file's bytes (its pages past the file's end, in the WAL, not counted). */
uint64_t pfr_st_space_db_file(const struct store_space *sp);

/* The ring's files' bytes: database, WAL and spare file. */
uint64_t pfr_st_space_files(const struct store_space *sp);

#endif
