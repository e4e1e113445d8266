/*
 * Small building blocks of the store: a bounds-checked reader, an interning table of byte keys
 * ("ktab") and the store's use of common's byte buffer, hash and integer map. Internal to
 * pfr_store.
 */
#ifndef PFR_STORE_UTIL_H
#define PFR_STORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pfr_buf.h"
#include "pfr_hash.h"
#include "pfr_map.h"
#include "pfr_vec.h"

/* ---- output buffer: pfr_buf (common/pfr_buf.h); its oom is checked once at the end ---- */

static inline uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ---- input reader over untrusted bytes: every read is bounds-checked; the first failure sets
 * bad, later reads return 0, so a decoder checks once per item ---- */
struct srd {
    const uint8_t *p, *end;
    bool bad;
};

static inline uint64_t srd_uv(struct srd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            break;
        uint8_t c = *r->p++;
        if (shift == 63 && c > 1)
            break; /* more than 64 bits */
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    r->bad = true;
    r->p = r->end;
    return 0;
}
static inline int64_t srd_sv(struct srd *r)
{
    return unzigzag(srd_uv(r));
}
static inline uint8_t srd_u8(struct srd *r)
{
    if (r->p >= r->end) {
        r->bad = true;
        return 0;
    }
    return *r->p++;
}
static inline size_t srd_left(const struct srd *r)
{
    return (size_t)(r->end - r->p);
}
/* A count of items that each take at least min_bytes: larger than what is left is corrupt. */
static inline uint32_t srd_count(struct srd *r, size_t min_bytes)
{
    uint64_t n = srd_uv(r);
    if (n > UINT32_MAX - 1 || (min_bytes && n > srd_left(r) / min_bytes)) {
        r->bad = true;
        r->p = r->end;
        return 0;
    }
    return (uint32_t)n;
}

/* ---- hashing: pfr_hash_bytes (common/pfr_hash.h); slice ids store its values ---- */

/* ---- ktab: dense table of byte-string keys, optionally hash-indexed for interning.
 * Keys live in one arena, each 8-byte aligned (records are read in place) and followed by a NUL
 * byte (string keys are C strings). ---- */
struct ktab {
    uint8_t *arena;
    size_t alen, acap;
    uint32_t *off; /* n + 1 entries: off[i + 1] ends key i (after its NUL); key i starts at
                      off[i] rounded up to 8 */
    uint32_t n, cap;
    uint64_t *slots; /* hash index: 0 empty, else (hash high 32 bits << 32) | (index + 1) */
    size_t mask;     /* slots capacity - 1; slots == NULL when not indexed */
};

void pfr_st_ktab_free(struct ktab *t);
/* Forget entries, keep memory. */
void pfr_st_ktab_reset(struct ktab *t);
/* Drop entries n and above (an index, if any, is rebuilt at the next intern). */
void pfr_st_ktab_truncate(struct ktab *t, uint32_t n);
/* Append a key without indexing; returns its index or a negative errno. */
int64_t pfr_st_ktab_add(struct ktab *t, const void *key, size_t len);
/* Index of key, adding it if absent (*added set accordingly); builds the index if needed. */
int64_t pfr_st_ktab_intern(struct ktab *t, const void *key, size_t len, bool *added);
/* dst becomes a copy of src's first n keys, at the same indexes, indexed for interning: one copy
 * of the bytes and one hash a key, where interning them one by one grew the arena and the index
 * step by step. -EEXIST when two of the keys are equal (dst then holds them, unusable for
 * interning: the caller frees it), -EINVAL when src has fewer than n, -ENOMEM. */
int pfr_st_ktab_copy(struct ktab *dst, const struct ktab *src, uint32_t n);
/* As pfr_st_ktab_copy, but src's memory becomes dst's when n is all of it (src is left empty),
 * instead of copied: a table taken over whole costs its index only. */
int pfr_st_ktab_move(struct ktab *dst, struct ktab *src, uint32_t n);
/* Index of key or -1. */
int64_t pfr_st_ktab_find(struct ktab *t, const void *key, size_t len);
static inline const uint8_t *ktab_key(const struct ktab *t, uint32_t i, size_t *len)
{
    size_t start = ((size_t)t->off[i] + 7) & ~(size_t)7;
    *len = t->off[i + 1] - start - 1;
    return t->arena + start;
}
static inline size_t ktab_bytes(const struct ktab *t)
{
    return t->acap + (size_t)t->cap * 4 + (t->slots ? (t->mask + 1) * 8 : 0);
}

/* ---- integer maps: pfr_map (common/pfr_map.h) holding uint32 values ---- */
/* The value of key; if absent, inserts val_if_new and returns it. *found tells which. UINT32_MAX
 * on ENOMEM. */
static inline uint32_t store_map_put(pfr_map *m, uint64_t key, uint32_t val_if_new, bool *found)
{
    uint64_t *v;
    int rc = pfr_map_intern(m, key, val_if_new, &v);
    if (rc < 0)
        return UINT32_MAX;
    *found = rc == 1;
    return (uint32_t)*v;
}
/* Value of key or UINT32_MAX when absent. */
static inline uint32_t store_map_get(const pfr_map *m, uint64_t key)
{
    const uint64_t *v = pfr_map_get(m, key);
    return v ? (uint32_t)*v : UINT32_MAX;
}

/* Vectors grow with pfr_vec_grow (common/pfr_vec.h). */
#define VEC_RESERVE(v, cap, need) PFR_VEC_RESERVE(v, cap, need)

#endif
