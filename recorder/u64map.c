#include "u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)pfr_mix64(key) & (cap - 1);
}

void pfr_u64map_free(pfr_u64map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof(*m));
}

void pfr_u64map_clear(pfr_u64map *m)
{
    if (m->used)
        memset(m->used, 0, m->cap);
    m->n = 0;
    m->tomb = 0;
}

uint64_t *pfr_u64map_get(const pfr_u64map *m, uint64_t key)
{
    if (m->n == 0)
        return NULL;
    for (size_t i = slot_of(key, m->cap), probes = 0; probes < m->cap;
         i = (i + 1) & (m->cap - 1), probes++) {
        if (m->used[i] == 0)
            return NULL;
        if (m->used[i] == 1 && m->keys[i] == key)
            return &m->vals[i];
    }
    return NULL;
}

static int rehash(pfr_u64map *m, size_t cap)
{
    pfr_u64map nm = {0};
    nm.keys = malloc(cap * sizeof(uint64_t));
    nm.vals = malloc(cap * sizeof(uint64_t));
    nm.used = calloc(cap, 1);
    nm.cap = cap;
    if (!nm.keys || !nm.vals || !nm.used) {
        pfr_u64map_free(&nm);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->used[i] != 1)
            continue;
        size_t j = slot_of(m->keys[i], cap);
        while (nm.used[j])
            j = (j + 1) & (cap - 1);
        nm.used[j] = 1;
        nm.keys[j] = m->keys[i];
        nm.vals[j] = m->vals[i];
        nm.n++;
    }
    pfr_u64map_free(m);
    *m = nm;
    return 0;
}

int pfr_u64map_put(pfr_u64map *m, uint64_t key, uint64_t val)
{
    uint64_t *v = pfr_u64map_get(m, key);
    if (v) {
        *v = val;
        return 0;
    }
    if ((m->n + m->tomb + 1) * 4 > m->cap * 3) {
        size_t cap = m->cap ? m->cap : 16;
        while ((m->n + 1) * 2 > cap)
            cap *= 2;
        if (rehash(m, cap))
            return -ENOMEM;
    }
    size_t i = slot_of(key, m->cap);
    while (m->used[i] == 1)
        i = (i + 1) & (m->cap - 1);
    if (m->used[i] == 2)
        m->tomb--;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

bool pfr_u64map_del(pfr_u64map *m, uint64_t key)
{
    uint64_t *v = pfr_u64map_get(m, key);
    if (!v)
        return false;
    size_t i = (size_t)(v - m->vals);
    m->used[i] = 2;
    m->n--;
    m->tomb++;
    return true;
}

bool pfr_u64map_next(const pfr_u64map *m, size_t *pos, uint64_t *key, uint64_t *val)
{
    for (size_t i = *pos; i < m->cap; i++) {
        if (m->used[i] == 1) {
            *key = m->keys[i];
            if (val)
                *val = m->vals[i];
            *pos = i + 1;
            return true;
        }
    }
    *pos = m->cap;
    return false;
}
