/* Buffers, hashing and tables used by the store's codec, writer and readers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_util.h"

/* ---- sbuf ---- */
void sbuf_free(struct sbuf *b)
{
    free(b->p);
    *b = (struct sbuf){0};
}

int sbuf_reserve(struct sbuf *b, size_t more)
{
    if (b->err)
        return b->err;
    if (more > SIZE_MAX - b->len)
        b->err = -ENOMEM;
    else if (b->len + more > b->cap && pfr_vec_grow(&b->p, &b->cap, b->len + more, 1))
        b->err = -ENOMEM;
    return b->err;
}

void sbuf_put(struct sbuf *b, const void *data, size_t n)
{
    if (!n || sbuf_reserve(b, n))
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void sbuf_put_u8(struct sbuf *b, uint8_t v)
{
    if (sbuf_reserve(b, 1))
        return;
    b->p[b->len++] = v;
}

void sbuf_put_uv(struct sbuf *b, uint64_t v)
{
    if (sbuf_reserve(b, 10))
        return;
    uint8_t *o = b->p + b->len;
    while (v >= 0x80) {
        *o++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    b->len = (size_t)(o - b->p);
}

/* ---- hash: word-at-a-time multiply/xorshift; keys are internal, not attacker-chosen in bulk ----
 */
uint64_t pfr_store_hash(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0x100000001b3ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    return pfr_mix64(h);
}

/* ---- ktab ---- */
void ktab_free(struct ktab *t)
{
    free(t->arena);
    free(t->off);
    free(t->slots);
    *t = (struct ktab){0};
}

void ktab_reset(struct ktab *t)
{
    t->alen = 0;
    t->n = 0;
    if (t->off)
        t->off[0] = 0;
    if (t->slots)
        memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
}

void ktab_truncate(struct ktab *t, uint32_t n)
{
    if (n >= t->n)
        return;
    t->n = n;
    t->alen = t->off[n];
    free(t->slots);
    t->slots = NULL;
    t->mask = 0;
}

int64_t ktab_add(struct ktab *t, const void *key, size_t len)
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
    return klen == len && memcmp(k, key, len) == 0;
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
        uint64_t h = pfr_store_hash(k, len);
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

int64_t ktab_find(struct ktab *t, const void *key, size_t len)
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
    return ktab_lookup(t, key, len, pfr_store_hash(key, len), &slot);
}

int64_t ktab_intern(struct ktab *t, const void *key, size_t len, bool *added)
{
    if (!t->slots || ((size_t)t->n + 1) * 2 > t->mask + 1) {
        size_t ns = t->slots ? (t->mask + 1) * 2 : 64;
        while (((size_t)t->n + 1) * 2 > ns)
            ns *= 2;
        if (ktab_rehash(t, ns))
            return -ENOMEM;
    }
    uint64_t h = pfr_store_hash(key, len);
    size_t slot;
    int64_t i = ktab_lookup(t, key, len, h, &slot);
    if (i >= 0) {
        if (added)
            *added = false;
        return i;
    }
    i = ktab_add(t, key, len);
    if (i < 0)
        return i;
    t->slots[slot] = (h & 0xffffffff00000000ull) | ((uint64_t)i + 1u);
    if (added)
        *added = true;
    return i;
}

/* ---- u64map ---- */
void u64map_free(struct u64map *m)
{
    free(m->keys);
    free(m->vals);
    *m = (struct u64map){0};
}

void u64map_clear(struct u64map *m)
{
    if (m->vals)
        memset(m->vals, 0, (m->mask + 1) * sizeof(*m->vals));
    m->n = 0;
}

static int u64map_grow(struct u64map *m)
{
    size_t ncap = m->vals ? (m->mask + 1) * 2 : 64;
    uint64_t *nk = malloc(ncap * sizeof(*nk));
    uint32_t *nv = calloc(ncap, sizeof(*nv));
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    size_t nmask = ncap - 1;
    if (m->vals) {
        for (size_t i = 0; i <= m->mask; i++) {
            if (!m->vals[i])
                continue;
            size_t j = pfr_mix64(m->keys[i]) & nmask;
            while (nv[j])
                j = (j + 1) & nmask;
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->mask = nmask;
    return 0;
}

uint32_t u64map_put(struct u64map *m, uint64_t key, uint32_t val_if_new, bool *found)
{
    if (!m->vals || (m->n + 1) * 2 > m->mask + 1)
        if (u64map_grow(m))
            return UINT32_MAX;
    size_t j = pfr_mix64(key) & m->mask;
    while (m->vals[j]) {
        if (m->keys[j] == key) {
            *found = true;
            return m->vals[j] - 1;
        }
        j = (j + 1) & m->mask;
    }
    m->keys[j] = key;
    m->vals[j] = val_if_new + 1;
    m->n++;
    *found = false;
    return val_if_new;
}

uint32_t u64map_get(const struct u64map *m, uint64_t key)
{
    if (!m->vals)
        return UINT32_MAX;
    size_t j = pfr_mix64(key) & m->mask;
    while (m->vals[j]) {
        if (m->keys[j] == key)
            return m->vals[j] - 1;
        j = (j + 1) & m->mask;
    }
    return UINT32_MAX;
}
