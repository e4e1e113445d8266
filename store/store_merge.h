/*
 * The merger (layer 4, internal): decoded chunks accumulated into one profile (store_merge.c).
 * Layers: docs/store.md, "Layers".
 */
#ifndef PFR_STORE_MERGE_H
#define PFR_STORE_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_codec.h"
#include "store_dict.h"
#include "store_util.h"

#define LS_FILTERED UINT32_MAX

/* Per dictionary chain: its entries' images in the output (index + 1, 0 = not mapped yet). Chains
 * of one stream map the same functions and modules again and again (each of a day's ~24 chains
 * holds most of the stream's ~5,000 locations), so functions and module strings are mapped once
 * per chain too, not once per location line. */
struct mdict {
    int64_t id;
    uint32_t *loc, *stack, *lset, *func, *map;
    size_t cap_loc, cap_stack, cap_lset, cap_func, cap_map;
};

struct store_merger {
    const pfr_store_filter *f;
    unsigned flags;
    pfr_profile *p;
    size_t nout;
    int *tmap; /* chunk's type index -> output type index or -1 */
    size_t cap_tmap;
    struct ktab stacks; /* output location index sequences */
    struct ktab lsets;  /* serialized label sets; 0 is the empty set */
    pfr_map acc;        /* (stack id << 32 | label set id) -> accumulator index; unused with
                                 PFR_MERGE_DROP_LABELS, where the accumulator index is the stack id */
    int64_t *vals;      /* nacc * nout */
    uint64_t *keys;
    size_t nacc, cap_vals, cap_keys;
    struct mdict *md;
    size_t nmd, cap_md;
    pfr_map md_idx;
    uint32_t *dloc, *dstack, *dlset; /* the current chunk's delta entries */
    size_t cap_dloc, cap_dstack, cap_dlset;
    pfr_line *lines;
    size_t cap_lines;
    pfr_label *labels;
    size_t cap_labels;
    pfr_buf key;
    bool have_time, have_period;
    /* Roll-ups: output types averaged over time (in-use heap, goroutines), NULL when none;
     * their duration-weighted sums, and the durations added. */
    uint8_t *gauge;
    double *gacc;
    size_t cap_gacc;
    double dur_total;
};

/* How a chunk counts in a merge. NULL = whole. Summed types are scaled by num/den (a range that
 * covers den ns of the chunk's num... see pfr_st_merger_chunk); averaged types (m->gauge) with
 * dur > 0 are weighted by dur instead. */
struct store_weight {
    int64_t num, den; /* share of the chunk's values: num/den (num == den: whole, exact) */
    int64_t dur;      /* the chunk's duration, for averaged types (0: not a roll-up) */
};

/* m->p must hold the output sample types (m->nout of them) before the first chunk. */
int pfr_st_merger_chunk(struct store_merger *m, const struct rstream *r, const struct chain *de,
                        const struct dchunk *c, const struct store_weight *w);
/* Mark the output types averaged over time (roll-ups); 0 or -ENOMEM. */
int pfr_st_merger_gauges(struct store_merger *m);
/* The accumulated samples added to m->p. */
int pfr_st_merger_finish(struct store_merger *m);
void pfr_st_merger_free(struct store_merger *m);

/* Types averaged over time rather than summed: Go's in-use heap and goroutines. */
bool pfr_st_type_is_gauge(const char *type);

#endif
