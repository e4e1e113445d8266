/* pfr_map: open addressing with linear probing and backward-shift deletion (see pfr_map.h). */
#include "pfr_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

#define MIN_CAP 16

static size_t home_of(uint64_t key, size_t cap)
{
    return (size_t)pfr_mix64(key) & (cap - 1);
}

void pfr_map_free(pfr_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

void pfr_map_clear(pfr_map *m)
{
    if (m->keys)
        memset(m->keys, 0, m->cap * sizeof(*m->keys));
    m->n = 0;
    m->has_zero = false;
}

/* The slot holding key (non-zero), or the empty slot where it would go. */
static size_t probe(const pfr_map *m, uint64_t key)
{
    size_t mask = m->cap - 1, i = home_of(key, m->cap);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int rehash(pfr_map *m, size_t cap)
{
    uint64_t *keys = calloc(cap, sizeof(*keys)), *vals = malloc(cap * sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    pfr_map old = *m;
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.keys[i])
            continue;
        size_t j = probe(m, old.keys[i]);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    free(old.keys);
    free(old.vals);
    return 0;
}

int pfr_map_reserve(pfr_map *m, size_t n)
{
    if (n > SIZE_MAX / 2 / sizeof(uint64_t))
        return -ENOMEM;
    size_t cap = m->cap ? m->cap : MIN_CAP;
    while (n * 2 > cap)
        cap *= 2;
    return cap == m->cap ? 0 : rehash(m, cap);
}

uint64_t *pfr_map_get(const pfr_map *m, uint64_t key)
{
    if (!key)
        return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
    if (!m->cap)
        return NULL;
    size_t i = probe(m, key);
    return m->keys[i] ? &m->vals[i] : NULL;
}

int pfr_map_intern(pfr_map *m, uint64_t key, uint64_t val_if_new, uint64_t **valp)
{
    uint64_t *v = pfr_map_get(m, key);
    int found = v != NULL;
    if (!v && !key) {
        m->has_zero = true;
        m->zero_val = val_if_new;
        m->n++;
        v = &m->zero_val;
    } else if (!v) {
        if (pfr_map_reserve(m, m->n + 1) < 0)
            return -ENOMEM;
        size_t i = probe(m, key);
        m->keys[i] = key;
        m->vals[i] = val_if_new;
        m->n++;
        v = &m->vals[i];
    }
    if (valp)
        *valp = v;
    return found;
}

int pfr_map_put(pfr_map *m, uint64_t key, uint64_t val)
{
    uint64_t *v;
    int rc = pfr_map_intern(m, key, val, &v);
    if (rc < 0)
        return rc;
    *v = val;
    return 0;
}

bool pfr_map_del(pfr_map *m, uint64_t key)
{
    if (!key) {
        if (!m->has_zero)
            return false;
        m->has_zero = false;
        m->n--;
        return true;
    }
    if (!m->cap)
        return false;
    size_t mask = m->cap - 1, i = probe(m, key);
    if (!m->keys[i])
        return false;
    /* Backward shift: pull later members of the cluster into the hole unless their home lies
     * (cyclically) after the hole, up to them. */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = home_of(m->keys[j], m->cap);
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->keys[i] = 0;
    m->n--;
    return true;
}

bool pfr_map_next(const pfr_map *m, size_t *pos, uint64_t *key, uint64_t *val)
{
    /* Position 0 is key 0; slot i is position i + 1. */
    if (*pos == 0) {
        *pos = 1;
        if (m->has_zero) {
            *key = 0;
            if (val)
                *val = m->zero_val;
            return true;
        }
    }
    for (size_t i = *pos - 1; i < m->cap; i++) {
        if (m->keys[i]) {
            *key = m->keys[i];
            if (val)
                *val = m->vals[i];
            *pos = i + 2;
            return true;
        }
    }
    *pos = m->cap + 1;
    return false;
}

size_t pfr_map_bytes(const pfr_map *m)
{
    return m->cap * 2 * sizeof(uint64_t);
}
