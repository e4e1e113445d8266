/*
 * Profiles from decoded chunks (layer 3, internal): a decoded chunk against its dictionary
 * tables as a pfr_profile, or as the samples view of pfr_store_scan_samples, with the sample
 * label filter applied. No SQLite: what pfr_st_chunk_load (store_dict.h) decoded goes in. Layers:
 * docs/store.md, "Layers".
 */
#ifndef PFR_STORE_BUILD_H
#define PFR_STORE_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_codec.h"
#include "store_dict.h"

/* String i of the chain's tables d with a chunk's delta above them. */
const char *pfr_st_str_at(const struct tabs *d, const struct tabs *delta, uint32_t i);
/* Whether label set ls passes f's sample label filter. */
bool pfr_st_lset_matches(const struct tabs *d, const struct tabs *delta, uint32_t ls,
                         const pfr_store_filter *f);

/* Scratch kept across chunks by a reader. */
struct build_scratch {
    uint32_t *locmap;  /* chunk-space location -> profile location + 1 */
    uint32_t *funcmap; /* chunk-space function -> profile function + 1 */
    size_t cap_func;
    uint8_t *lsok; /* label set: 0 unknown, 1 keep, 2 drop */
    size_t cap_loc, cap_ls;
    uint32_t *stack;
    size_t cap_stack;
    pfr_line *lines;
    size_t cap_lines;
    pfr_label *labels;
    size_t cap_labels;
};
void pfr_st_build_scratch_free(struct build_scratch *b);

/* A decoded chunk (against dictionary tables d) as a pfr_profile with the stream's sample types;
 * samples whose labels fail f's sample label filter are dropped. *out is the caller's. */
int pfr_st_build_profile(const struct rstream *r, const struct tabs *d, const struct dchunk *c,
                         const pfr_store_filter *f, struct build_scratch *b, pfr_profile **out);
/* Call cb with a decoded chunk (against dictionary tables d of chain dict) as samples
 * (pfr_store_scan_samples); samples whose labels fail f's filter are left out. */
int pfr_st_samples_call(const struct tabs *d, int64_t dict, const struct dchunk *c,
                        const pfr_store_filter *f, struct build_scratch *b, const pfr_chunk_meta *m,
                        pfr_samples_cb cb, void *ctx);

#endif
