#include "sym_hmap.h"

#include <errno.h>
#include <stdlib.h>

#include "pfr_hash.h"

static size_t slot_of(const struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2)
{
    return (size_t)(pfr_mix64(k1 ^ pfr_mix64(k2 + 0x9e3779b97f4a7c15ULL)) & (m->cap - 1));
}

static int grow(struct pfr_sym_hmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    struct pfr_sym_hslot *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    struct pfr_sym_hslot *old = m->slots;
    size_t ocap = m->cap;
    m->slots = ns;
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].used)
            continue;
        size_t j = slot_of(m, old[i].k1, old[i].k2);
        while (ns[j].used)
            j = (j + 1) & (ncap - 1);
        ns[j] = old[i];
    }
    free(old);
    return 0;
}

int pfr_sym_hmap_put(struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2, uint64_t val)
{
    /* keep the load factor under 1/2 so probe chains stay short */
    if ((m->n + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    size_t i = slot_of(m, k1, k2);
    while (m->slots[i].used) {
        if (m->slots[i].k1 == k1 && m->slots[i].k2 == k2) {
            m->slots[i].val = val;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (struct pfr_sym_hslot){k1, k2, val, 1};
    m->n++;
    return 0;
}

static bool find(const struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2, size_t *at)
{
    if (!m->cap)
        return false;
    size_t i = slot_of(m, k1, k2);
    while (m->slots[i].used) {
        if (m->slots[i].k1 == k1 && m->slots[i].k2 == k2) {
            *at = i;
            return true;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return false;
}

bool pfr_sym_hmap_get(const struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2, uint64_t *val)
{
    size_t i;
    if (!find(m, k1, k2, &i))
        return false;
    if (val)
        *val = m->slots[i].val;
    return true;
}

bool pfr_sym_hmap_del(struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2)
{
    size_t i;
    if (!find(m, k1, k2, &i))
        return false;
    size_t mask = m->cap - 1;
    /* backward-shift: move later members of the cluster into the hole when their home allows */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].used)
            break;
        size_t home = slot_of(m, m->slots[j].k1, m->slots[j].k2);
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between)
            continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].used = 0;
    m->n--;
    return true;
}

void pfr_sym_hmap_clear(struct pfr_sym_hmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        m->slots[i].used = 0;
    m->n = 0;
}

void pfr_sym_hmap_free(struct pfr_sym_hmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

size_t pfr_sym_hmap_bytes(const struct pfr_sym_hmap *m)
{
    return m->cap * sizeof(struct pfr_sym_hslot);
}

uint64_t pfr_sym_hash(const void *p, size_t len, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return pfr_mix64(h);
}
