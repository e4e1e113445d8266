/*
 * Internals of pfr_profile shared by the model, the codec and the merge. Not a public API.
 *
 * Storage is a few flat vectors per profile (no per-item malloc): records reference strings,
 * functions, mappings and locations by dense index, and variable-length parts (lines, stack
 * locations, labels) live in shared vectors addressed by (offset, count).
 *
 * Every record carries a hash of its *content* (computed from the hashes of the strings it
 * names, never from indices), so the same function, location or sample has the same hash in
 * every profile. Merge and decode reuse those hashes instead of rehashing.
 */
#ifndef PFR_PROFILE_INTERNAL_H
#define PFR_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pfr_hash.h" /* pfr_hash_bytes: the strings' hashes (pfr_string_hash) */
#include "pfr_profile.h"
#include "pfr_vec.h"

/* Records keep indices in 32 bits; this is the largest count a table may reach. */
#define PFR_MAX_ITEMS (UINT32_MAX - 1u)
#define PFR_LABEL_NUM UINT32_MAX /* pfr_label_rec.str of a numeric label */

/* Open-addressing hash index over a record vector. A slot is 0 (empty) or
 * (high 32 bits of the record's hash) << 32 | (record index + 1). */
struct pfr_htab {
    uint64_t *slots;
    size_t mask; /* capacity - 1; capacity is 0 or a power of two */
    size_t count;
};

struct pfr_strblock {
    struct pfr_strblock *next;
    size_t used, cap;
    char data[];
};

struct pfr_string_rec {
    const char *s; /* in a strblock: stable for the profile's life */
    uint64_t hash;
    uint32_t len;
};

struct pfr_mapping_rec {
    uint64_t start, limit, offset, hash;
    uint32_t file, build_id;
};

struct pfr_function_rec {
    int64_t start_line;
    uint64_t hash;
    uint32_t name, system_name, file;
};

struct pfr_location_rec {
    uint64_t address, hash;
    uint32_t mapping; /* mapping index + 1; 0 = none */
    uint32_t line_off, nlines;
};

struct pfr_label_rec {
    int64_t num;
    uint32_t key, str, unit; /* str == PFR_LABEL_NUM for a numeric label; unit 0 = none */
};

struct pfr_sample_rec {
    uint64_t hash;       /* stack and labels */
    uint64_t stack_hash; /* stack only */
    uint32_t loc_off, nlocs;
    uint32_t label_off, nlabels;
};

struct pfr_value_type {
    uint32_t type, unit;
};

struct pfr_profile {
    int err; /* sticky builder error */

    struct pfr_strblock *blocks;
    struct pfr_string_rec *strs;
    size_t nstrs, cap_strs;
    struct pfr_htab str_ht;

    struct pfr_value_type *types;
    size_t ntypes, cap_types;
    struct pfr_value_type period_type;
    int64_t period, time_nanos, duration_nanos;

    struct pfr_mapping_rec *maps;
    size_t nmaps, cap_maps;
    struct pfr_htab map_ht;

    struct pfr_function_rec *funcs;
    size_t nfuncs, cap_funcs;
    struct pfr_htab func_ht;

    struct pfr_location_rec *locs;
    size_t nlocs, cap_locs;
    struct pfr_htab loc_ht;
    pfr_line *lines;
    size_t nlines, cap_lines;

    struct pfr_sample_rec *samples;
    size_t nsamples, cap_samples;
    struct pfr_htab sample_ht;
    uint32_t *stack; /* location indices of all samples */
    size_t nstack, cap_stack;
    int64_t *values; /* ntypes per sample */
    size_t cap_values;
    struct pfr_label_rec *labels;
    pfr_label *pub_labels; /* same entries as labels, as the public struct */
    size_t nlabels, cap_labels, cap_pub_labels;
};

/* ---- hashing ---- */
#define PFR_HASH_K 0x9e3779b97f4a7c15ull

static inline uint64_t pfr_hash_mix(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

/* One step of a fold; finish a fold with pfr_hash_mix. */
static inline uint64_t pfr_hash_step(uint64_t h, uint64_t v)
{
    h = (h << 5 | h >> 59) ^ v;
    return h * PFR_HASH_K;
}

/* Hash of a label from the hashes of its strings (order-independent sums of these make the hash
 * of a label set). */
static inline uint64_t pfr_label_hash(uint64_t key_h, bool is_num, uint64_t str_h, int64_t num,
                                      uint64_t unit_h)
{
    uint64_t h = pfr_hash_step(0x51ab, key_h);
    if (is_num)
        h = pfr_hash_step(pfr_hash_step(h, (uint64_t)num), unit_h ^ 0x3);
    else
        h = pfr_hash_step(h, str_h);
    return pfr_hash_mix(h);
}

static inline uint64_t pfr_sample_hash(uint64_t stack_hash, uint64_t labels_hash)
{
    return pfr_hash_mix(pfr_hash_step(stack_hash, labels_hash));
}

/* ---- internal builder entry points (indices are trusted to be in range) ---- */
/* Set the sticky error (first one wins) and return it. */
static inline int pfr_fail(pfr_profile *p, int err)
{
    if (!p->err)
        p->err = err;
    return err;
}

/* Intern len bytes (no NUL inside) whose hash is h. */
int64_t pfr_intern_hashed(pfr_profile *p, const char *s, size_t len, uint64_t h);
/* Find or add a record whose hash field is already set (pfr_*_hash below, or the hash of the same
 * content in another profile). */
int64_t pfr_mapping_put(pfr_profile *p, const struct pfr_mapping_rec *m);
int64_t pfr_function_put(pfr_profile *p, const struct pfr_function_rec *f);
int64_t pfr_location_put(pfr_profile *p, uint32_t mapping_plus1, uint64_t address,
                         const pfr_line *lines, uint32_t nlines, uint64_t hash);

uint64_t pfr_mapping_hash(const pfr_profile *p, const struct pfr_mapping_rec *m);
uint64_t pfr_function_hash(const pfr_profile *p, const struct pfr_function_rec *f);
uint64_t pfr_location_hash(const pfr_profile *p, uint32_t mapping_plus1, uint64_t address,
                           const pfr_line *lines, size_t nlines);
/* Add or sum a sample. labels are records of p; labels_hash their set hash. values may be NULL
 * only when the profile has no sample types. */
int64_t pfr_sample_put(pfr_profile *p, const uint32_t *locs, uint32_t nlocs, uint64_t stack_hash,
                       const int64_t *values, const struct pfr_label_rec *labels, uint32_t nlabels,
                       uint64_t labels_hash);

static inline uint64_t pfr_str_hash(const pfr_profile *p, uint32_t i)
{
    return p->strs[i].hash;
}

/* Stack hash of location indices of p. */
static inline uint64_t pfr_stack_hash(const pfr_profile *p, const uint32_t *locs, size_t n)
{
    uint64_t h = 0x5eed;
    for (size_t i = 0; i < n; i++)
        h = pfr_hash_step(h, p->locs[locs[i]].hash);
    return pfr_hash_mix(h ^ n);
}

/* Label-set hash of label records of p. */
uint64_t pfr_labels_hash(const pfr_profile *p, const struct pfr_label_rec *l, size_t n);

/* Expected table sizes, for pfr_profile_reserve. */
struct pfr_sizes {
    size_t strs, maps, funcs, locs, lines, samples, stack, labels, types;
};
/* Make room for that many items (in addition to what p holds) in one step; 0 or -ENOMEM. */
int pfr_profile_reserve(pfr_profile *p, const struct pfr_sizes *z);

/* Vectors grow with pfr_vec_grow (common/pfr_vec.h). */
#define PFR_RESERVE(vec, cap, need) PFR_VEC_RESERVE(vec, cap, need)

#endif
