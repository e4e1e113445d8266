/* Tables used by the store's codec, writer and readers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_util.h"

/* ---- ktab ---- */
void pfr_st_ktab_free(struct ktab *t)
{
    free(t->arena);
    free(t->off);
    free(t->slots);
    *t = (struct ktab){0};
}

void pfr_st_ktab_reset(struct ktab *t)
{
    t->alen = 0;
    t->n = 0;
    if (t->off)
        t->off[0] = 0;
    if (t->slots)
        memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
}

void pfr_st_ktab_truncate(struct ktab *t, uint32_t n)
{
    if (n >= t->n)
        return;
    t->n = n;
    t->alen = t->off[n];
    free(t->slots);
    t->slots = NULL;
    t->mask = 0;
}

int64_t pfr_st_ktab_add(struct ktab *t, const void *key, size_t len)
{
    size_t cap = t->cap;
    size_t start = (t->alen + 7) & ~(size_t)7;
    if (t->n >= UINT32_MAX - 2 || len > UINT32_MAX - 16 - start)
        return -E2BIG;
    if (VEC_RESERVE(t->off, cap, (size_t)t->n + 2))
        return -ENOMEM;
    t->cap = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
    if (VEC_RESERVE(t->arena, t->acap, start + len + 1))
        return -ENOMEM;
    if (len)
        memcpy(t->arena + start, key, len);
    t->arena[start + len] = 0;
    t->off[t->n] = (uint32_t)t->alen;
    t->alen = start + len + 1;
    t->off[t->n + 1] = (uint32_t)t->alen;
    return t->n++;
}

static bool key_eq(const struct ktab *t, uint32_t i, const void *key, size_t len)
{
    size_t klen;
    const uint8_t *k = ktab_key(t, i, &klen);
    return klen == len && (len == 0 || memcmp(k, key, len) == 0); /* an empty key may be NULL */
}

/* Index t's keys into nslots slots. unique: -EEXIST when two keys are equal (a table copied
 * whole from a corrupt source), where interning would have folded them into one index. */
static int ktab_rehash(struct ktab *t, size_t nslots, bool unique)
{
    uint64_t *ns = calloc(nslots, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    size_t mask = nslots - 1;
    for (uint32_t i = 0; i < t->n; i++) {
        size_t len;
        const uint8_t *k = ktab_key(t, i, &len);
        uint64_t h = pfr_hash_bytes(k, len);
        size_t j = h & mask;
        for (; ns[j]; j = (j + 1) & mask) {
            if (unique && (ns[j] >> 32) == (h >> 32) && key_eq(t, (uint32_t)ns[j] - 1, k, len)) {
                free(ns);
                return -EEXIST;
            }
        }
        ns[j] = (h & 0xffffffff00000000ull) | (i + 1u);
    }
    free(t->slots);
    t->slots = ns;
    t->mask = mask;
    return 0;
}

/* Slots for n keys and one more, at most half full: from, doubled as often as needed. */
static size_t ktab_slots_for(size_t n, size_t from)
{
    while ((n + 1) * 2 > from)
        from *= 2;
    return from;
}

static int64_t ktab_lookup(struct ktab *t, const void *key, size_t len, uint64_t h, size_t *slot)
{
    size_t j = h & t->mask;
    for (;;) {
        uint64_t s = t->slots[j];
        if (!s) {
            *slot = j;
            return -1;
        }
        if ((s >> 32) == (h >> 32)) {
            uint32_t i = (uint32_t)s - 1;
            if (key_eq(t, i, key, len))
                return i;
        }
        j = (j + 1) & t->mask;
    }
}

int64_t pfr_st_ktab_find(struct ktab *t, const void *key, size_t len)
{
    if (!t->slots) {
        if (!t->n)
            return -1;
        if (ktab_rehash(t, 64, false))
            return -1;
        while ((size_t)t->n * 2 > t->mask + 1)
            if (ktab_rehash(t, (t->mask + 1) * 2, false))
                return -1;
    }
    size_t slot;
    return ktab_lookup(t, key, len, pfr_hash_bytes(key, len), &slot);
}

int pfr_st_ktab_copy(struct ktab *dst, const struct ktab *src, uint32_t n)
{
    if (n > src->n)
        return -EINVAL;
    pfr_st_ktab_reset(dst);
    size_t cap = dst->cap, bytes = n ? src->off[n] : 0;
    if (VEC_RESERVE(dst->off, cap, (size_t)n + 2))
        return -ENOMEM;
    dst->cap = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
    if (VEC_RESERVE(dst->arena, dst->acap, bytes + 1))
        return -ENOMEM;
    if (bytes)
        memcpy(dst->arena, src->arena, bytes);
    if (n)
        memcpy(dst->off, src->off, ((size_t)n + 1) * sizeof(*dst->off));
    else
        dst->off[0] = 0;
    dst->n = n;
    dst->alen = bytes;
    return ktab_rehash(dst, ktab_slots_for(n, 64), true);
}

int pfr_st_ktab_move(struct ktab *dst, struct ktab *src, uint32_t n)
{
    if (n != src->n || n == 0) /* a prefix, or nothing to take (a copy of no key costs none) */
        return pfr_st_ktab_copy(dst, src, n);
    pfr_st_ktab_free(dst);
    *dst = *src;
    *src = (struct ktab){0};
    return ktab_rehash(dst, ktab_slots_for(n, 64), true);
}

int64_t pfr_st_ktab_intern(struct ktab *t, const void *key, size_t len, bool *added)
{
    if (!t->slots || ((size_t)t->n + 1) * 2 > t->mask + 1) {
        if (ktab_rehash(t, ktab_slots_for(t->n, t->slots ? (t->mask + 1) * 2 : 64), false))
            return -ENOMEM;
    }
    uint64_t h = pfr_hash_bytes(key, len);
    size_t slot;
    int64_t i = ktab_lookup(t, key, len, h, &slot);
    if (i >= 0) {
        if (added)
            *added = false;
        return i;
    }
    i = pfr_st_ktab_add(t, key, len);
    if (i < 0)
        return i;
    t->slots[slot] = (h & 0xffffffff00000000ull) | ((uint64_t)i + 1u);
    if (added)
        *added = true;
    return i;
}
