/* A small open-addressing map from non-zero 64-bit keys to 64-bit values (no deletion). */
#ifndef PFR_GOHEAP_MAP_H
#define PFR_GOHEAP_MAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

typedef struct pfr_u64map {
    uint64_t *keys; /* 0 = empty */
    uint64_t *vals;
    size_t cap, n;
} pfr_u64map;

static inline uint64_t pfr_u64map_hash(uint64_t x)
{
    return pfr_mix64(x);
}

static inline void pfr_u64map_free(pfr_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

static inline void pfr_u64map_clear(pfr_u64map *m)
{
    if (m->keys)
        memset(m->keys, 0, m->cap * sizeof(*m->keys));
    m->n = 0;
}

/* Pointer to key's value, or NULL. */
static inline uint64_t *pfr_u64map_get(const pfr_u64map *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    size_t j = pfr_u64map_hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == key)
            return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

static inline int pfr_u64map_grow(pfr_u64map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256;
    uint64_t *nk = calloc(ncap, sizeof(*nk)), *nv = malloc(ncap * sizeof(*nv));
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = pfr_u64map_hash(m->keys[i]) & (ncap - 1);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

/* Set key (non-zero) to val: 0 or -ENOMEM / -EINVAL. */
static inline int pfr_u64map_put(pfr_u64map *m, uint64_t key, uint64_t val)
{
    if (!key)
        return -EINVAL;
    if ((m->n + 1) * 2 > m->cap && pfr_u64map_grow(m) < 0)
        return -ENOMEM;
    size_t j = pfr_u64map_hash(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) {
        m->keys[j] = key;
        m->n++;
    }
    m->vals[j] = val;
    return 0;
}

#endif
