/*
 * Space policy (layer 0, internal): a pure function from measurements (the file system's size
 * and free space, the ring's files, the cap, the reserve, the largest WAL seen) to a decision
 * (the cap in force and why, the WAL's budget, the spare file's size, the database's target,
 * how tight the disk is). No I/O: store_space.c measures and applies, the unit tests
 * (test_store_policy) feed it figures. Why this shape: docs/store.md, "Disk space".
 */
#ifndef PFR_STORE_POLICY_H
#define PFR_STORE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_store.h"

struct store_policy_in {
    uint64_t max_bytes;                     /* the configured cap */
    uint64_t fs_bytes, fs_avail;            /* the file system: size, free for the ring's user */
    uint64_t db_file, wal_file, spare_file; /* the ring's files as they are */
    uint64_t reserve;                       /* bytes to keep free (resolved) */
    uint64_t wal_seen; /* the largest transaction's WAL a writer has seen (0: none, or a reader) */
    uint64_t wal_recent; /* the largest of the writer's last transactions' WAL (0: wal_seen) */
    uint64_t room_held;  /* the ring's files at their largest since the disk filled (0: none) */
    bool reader;         /* a reader: it counts the spare file as it finds it */
};

struct store_policy_out {
    uint64_t cap; /* the cap in force: the ring's files stay within it */
    enum pfr_store_cap_reason reason;
    uint64_t wal_budget;  /* the WAL's share: checkpointed every half, truncated to it */
    uint64_t spare_bytes; /* the spare file's size: room for a WAL of the largest transaction */
    uint64_t wal_share;   /* the WAL's peak counted in the database's target (<= spare_bytes) */
    uint64_t shares;      /* the WAL's and the spare file's shares: held or owed */
    uint64_t db_target;   /* bytes of pages the database may hold */
    bool disk_bound;      /* db_target is the disk's, below the configured cap's */
    bool tight;           /* free space near or below the reserve: give back in small steps */
    bool starved;         /* hardly any free space: the room the ring holds is shared out anew */
    /* Set when starved (a writer): the WAL keeps the blocks of one recent transaction (wal_keep,
     * its journal_size_limit), the rest of the room is the database's; the free space it is
     * still owed (wal_owed) is not the database's to grow into. */
    uint64_t wal_keep, wal_owed;
    /* The bytes the database file should hold at least (0: none): a ring the disk bounds takes
     * the room of the floor while the disk has it, as free pages, so that a disk filled up when
     * the ring is still young leaves it more than its first chunks. */
    uint64_t db_pad;
    uint64_t room; /* the room the ring holds: its files, or what it held when the disk filled */
};

/* The WAL's share of a cap (cap/16, 64 KiB to 4 MiB). */
uint64_t pfr_st_policy_wal_budget(uint64_t cap);

/* The WAL's peak for a writer: the largest transaction's WAL seen, at least three quarters of
 * the budget, at most an eighth of the cap max_bytes (or the budget); the WAL's share. */
uint64_t pfr_st_policy_wal_peak(uint64_t wal_seen, uint64_t budget, uint64_t max_bytes);

void pfr_st_policy_decide(const struct store_policy_in *in, struct store_policy_out *out);

/* The steps (roll-ups, rows of chains without chunks) the next transaction of room alone may
 * take, after one that took steps of at most cap and wrote frames WAL frames, the WAL's budget
 * being budget frames; more: room was still lacking after it. Halved past three quarters of the
 * budget, grown by a quarter while under half of it and capped; else as it was (at least 1). */
size_t pfr_st_policy_room_steps(size_t cap, size_t steps, uint64_t frames, uint64_t budget,
                                bool more);

/* Where a piece of the coarsest tier (docs/store.md, "Which chunks") the policy picked is made:
 * now, by the step that picked it; or in a transaction of room alone (room_txn) of its own: the
 * appends' transaction starts again after it (PIECE_APART: once per append, apart_done after),
 * a transaction of room that took other steps already ends and the next one starts with it
 * (PIECE_NEXT). A piece with an append or other roll-ups made transactions past the WAL's
 * budget, and the largest sizes the WAL's share and the spare file. */
enum store_piece_when { PIECE_NOW, PIECE_APART, PIECE_NEXT };
enum store_piece_when pfr_st_policy_piece_when(bool appends, bool apart_done, size_t steps);

#endif
