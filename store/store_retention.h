/*
 * Tiered retention (layer 5, internal): what the ring gives up when it must make room. Old
 * chunks are first rolled up (the chunks of one stream whose starts fall in one step of the next
 * tier become one chunk), and only the coarsest tier is deleted, oldest first. This module
 * decides what and merges; the writer (store_write.c) writes the merged chunk through its
 * append path and deletes the rows. Built on the floor, the dictionary layer and the merger.
 * Layers and the cursor rule: docs/store.md, "Layers" and "Tiers".
 */
#ifndef PFR_STORE_RETENTION_H
#define PFR_STORE_RETENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_db.h"
#include "store_dict.h"
#include "store_cursor.h"
#include "store_pins.h"

/* Bytes a chunk's rows take besides its payload (two rows and their index entries). */
#define STORE_ROW_OVERHEAD 96

/* The steps in force: t's own, or the default. Never fails for a parsed t. */
void pfr_st_tiers_resolve(const pfr_store_tiers *t, pfr_store_tiers *out);

/* What retention must leave as it is: chunks some consumer has not taken (id > min_cursor, or set
 * aside) and chunks a pin keeps (never rolled up, never evicted). */
struct store_keep {
    bool any_cursor;
    int64_t min_cursor;
    const struct store_pins *pins; /* NULL: none */
    struct store_dict *dict;       /* the stream rows the pins' selections are matched against */
    /* chunks a consumer set aside (below its cursor, not taken: a sink rejected them, and
     * they are sent again by hand): never merged, so a retry sends them as recorded. NULL: none */
    const struct store_cursors *asides;
};

/* The writer's retention state: the steps and the bytes each tier holds (measured once, then
 * kept up to date by the writer's notes; a rolled back transaction forgets them). */
struct store_retention {
    pfr_store_tiers tiers; /* resolved */
    bool measured;
    unsigned steps; /* since the last measure */
    /* Each tier's chunks (payloads and rows) and the dictionary chains no finer tier's chunks
     * reference (what only it keeps alive). [0]: payloads only (what the finest holds is what
     * the others leave). */
    uint64_t bytes[PFR_STORE_MAX_TIERS + 1];
    int64_t coarse_start; /* the coarsest tier's oldest start, as last measured (0: none) */
    /* coarse_start is known (kept by the writer's notes, pfr_st_retention_coarse_note) and read
     * again only after a deletion from that tier, a rolled back transaction, or every
     * RET_COARSE_MEASURES measures (another writer's deletions): its query read every row of
     * the tier (at full scale ~40 of a measure's ~90 ms, some 750 measures an hour) */
    bool coarse_known;
    unsigned coarse_measures; /* measures since coarse_start was read */
    /* Per tier k below the coarsest, the chain of its last roll-up: measured again once no
     * chunk of tier k or finer references it (0: none to watch), its charge having moved to a
     * coarser tier */
    int64_t watch_base[PFR_STORE_MAX_TIERS];
};

/* The tiers' policy as a pure function of measurements (unit-tested, test_store_retention):
 * what to roll up or delete next when the database is short of room. */
struct store_ret_in {
    unsigned n;                              /* steps (tiers above the finest); 0: off */
    uint64_t bytes[PFR_STORE_MAX_TIERS + 1]; /* as struct store_retention's */
    uint64_t used;                           /* pages in use, bytes */
    int top;                                 /* the coarsest tier that has chunks (-1: none) */
    int64_t coarse_age;                      /* newest end - the coarsest tier's oldest start */
    bool fine_short; /* the finest tier reaches back less than the coarsest tier's step */
    bool fine_near;  /* ... less than that step and a little (pieces of the coarsest) */
};
struct store_ret_plan {
    int trim;                           /* the coarsest, deleted before any roll-up (-1: no) */
    int order[PFR_STORE_MAX_TIERS + 1]; /* tiers whose oldest whole bucket is rolled up, in turn */
    /* order[i]'s buckets only where no chunk of a finer tier is left in them (settled): the
     * finest tier's roll-ups are not each rolled on alone */
    bool settled[PFR_STORE_MAX_TIERS + 1];
    /* order[i] (the tier below the coarsest) rolls the rolled part of a whole coarsest bucket
     * (its chunks of every tier between, and the piece made before) into the coarsest as a
     * piece, leaving the bucket's finest chunks as they are */
    bool piece[PFR_STORE_MAX_TIERS + 1];
    unsigned norder;
    int evict_last; /* when none of them has a bucket to roll up: this tier's oldest go */
};
/* How far back the coarsest tier is kept whatever its bytes (issue 31: 30 days of hours), and
 * the share of the pages in use it may hold at most. */
#define STORE_RET_COARSE_HORIZON_NS (30ll * 86400 * 1000000000ll)
#define STORE_RET_COARSE_MAX_NUM    1
#define STORE_RET_COARSE_MAX_DEN    2
void pfr_st_retention_plan(const struct store_ret_in *in, struct store_ret_plan *out);

/* A group of chunks to roll up into one of tier `tier` (their tier + 1). */
struct store_rollup {
    int tier;
    int64_t stream_id;
    struct store_chunk_ref *in; /* increasing start; in[0].id is the smallest id */
    size_t n, cap;
    int64_t min_id;
    uint64_t in_bytes;    /* payloads + row overhead */
    uint64_t finer_bytes; /* of it, the inputs of tiers finer than the group's own */
    int64_t start_ns, end_ns;
    bool piece; /* a piece of the coarsest: the rolled part of an hour (pick_piece) */
};
void pfr_st_rollup_free(struct store_rollup *g);

enum store_retention_step {
    STORE_RET_NONE = 0, /* nothing left to give up */
    STORE_RET_ROLLUP,   /* g holds a group to merge */
    STORE_RET_EVICT,    /* delete the oldest chunks of tier *evict_tier as the appends need */
    STORE_RET_TRIM,     /* the coarsest tier is past its horizon or share: delete a few of its
                         * oldest (tier *evict_tier) now, then ask again */
};

/* What makes room next (the caller measured the database short of room). Consumers' cursors: with
 * any_cursor, only chunks every consumer has taken (id <= min_cursor) are rolled up (the merged
 * row keeps the smallest id of its inputs, so it is behind every cursor too: never sent again;
 * a chunk not taken is never merged, so never lost to a merge). Returns the step (>= 0) or a
 * negative errno. Inside the writer's transaction. */
int pfr_st_retention_next(struct store_retention *r, struct store_db *d,
                          const struct store_keep *keep, uint64_t used, struct store_rollup *g,
                          int *evict_tier);

/* The group's chunks merged into one profile (*out, the caller's): summed types added up,
 * averaged types (in-use heap, goroutines) weighted by each chunk's duration. -EBADMSG when an
 * input is corrupt (the group is then left as it is). */
int pfr_st_rollup_merge(struct store_dict *dict, const struct store_rollup *g, pfr_profile **out);

/* A roll-up encoded in its inputs' own dictionary chain (no dictionary rows of its own): the
 * chunk's blob and totals, and the chain's base and layer it references. */
struct store_rolled {
    int64_t base_id, dict_id;
    pfr_buf blob, tot;
};
void pfr_st_rolled_free(struct store_rolled *o);

/* The group's chunks merged by (stack, label set) of their chain, as pfr_st_rollup_merge merges
 * them (sums exact, averaged types duration-weighted), encoded against the chain as of the
 * newest input's layer: no profile is built and no dictionary entry written. -ENOTSUP when the
 * inputs span chains or carry entries of their own (the profile path then). */
int pfr_st_rollup_inchain(struct store_dict *dict, const struct store_rollup *g, pfr_st_hc *hc,
                          struct store_rolled *out);

/* The writer's notes: bytes added to or taken from a tier. */
void pfr_st_retention_note(struct store_retention *r, int tier, int64_t delta);

/* The writer's notes on the coarsest tier's oldest start: a chunk of tier starting at start_ns
 * was written (added), or chunks of tier were deleted (tier < 0: of any tier; start_ns unused),
 * or the transaction rolled back (pfr_st_retention_coarse_forget). */
void pfr_st_retention_coarse_note(struct store_retention *r, int tier, int64_t start_ns,
                                  bool added);
void pfr_st_retention_coarse_forget(struct store_retention *r);

#endif
