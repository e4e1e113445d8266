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

static int ktab_rehash(struct ktab *t, size_t nslots)
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
        while (ns[j])
            j = (j + 1) & mask;
        ns[j] = (h & 0xffffffff00000000ull) | (i + 1u);
    }
    free(t->slots);
    t->slots = ns;
    t->mask = mask;
    return 0;
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
        if (ktab_rehash(t, 64))
            return -1;
        while ((size_t)t->n * 2 > t->mask + 1)
            if (ktab_rehash(t, (t->mask + 1) * 2))
                return -1;
    }
    size_t slot;
    return ktab_lookup(t, key, len, pfr_hash_bytes(key, len), &slot);
}

int64_t pfr_st_ktab_intern(struct ktab *t, const void *key, size_t len, bool *added)
{
    if (!t->slots || ((size_t)t->n + 1) * 2 > t->mask + 1) {
        size_t ns = t->slots ? (t->mask + 1) * 2 : 64;
        while (((size_t)t->n + 1) * 2 > ns)
            ns *= 2;
        if (ktab_rehash(t, ns))
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
