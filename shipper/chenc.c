#include "chenc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coroot_fmt.h"

/* A remembered stack: its content key (two 64-bit lanes, mixed with the service), Coroot's
 * hash, and the LastSeen written (sent_until) or waiting in the open batch (staged_until). */
struct sentry {
    uint64_t a, b;
    uint64_t hash;
    int64_t sent_until;
    int64_t staged_until;
    uint32_t staged_gen;
};

struct smemo {
    const char *ptr;
    uint64_t h;
    uint32_t gen;
};

struct lkey {
    uint64_t a, b;
    uint32_t gen;
};

struct aslot {
    uint64_t a, b;
    uint32_t sample;
};

struct pfr_chenc {
    pfr_chenc_opts o;
    /* remembered stacks: entries never move; tab holds index + 1 (0 = empty) */
    struct sentry *ent;
    size_t nent, cap_ent;
    uint32_t *tab;
    size_t tab_mask;
    uint32_t gen; /* batch generation, never 0 */
    uint32_t *staged;
    size_t nstaged, cap_staged;

    pfr_buf samples, stacks;
    uint64_t sample_rows, stack_rows;

    /* per-chunk scratch */
    uint32_t cgen; /* chunk generation, never 0 */
    struct smemo *smemo;
    size_t smemo_mask;
    struct lkey *lkeys;
    size_t cap_lkeys;
    uint32_t *atab;
    size_t atab_cap;
    struct aslot *slots;
    size_t nslots, cap_slots;
    int64_t *vals;
    size_t cap_vals;
    pfr_frame *frames;
    size_t cap_frames;
    pfr_buf prefix; /* the constant head of a sample row, per sample type */
    size_t *prefix_off;
    size_t cap_prefix_off;
    pfr_buf str;  /* stack strings of one stack, back to back */
    size_t *soff; /* their end offsets */
    size_t cap_soff;
};

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

static inline uint64_t mix64b(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t comb_a(uint64_t h, uint64_t x)
{
    return mix64(h * 0x9e3779b97f4a7c15ull ^ x);
}

static inline uint64_t comb_b(uint64_t h, uint64_t x)
{
    return mix64b((h ^ 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full + x);
}

/* A fast content hash of a string (not Coroot's hash: only a cache key). */
static uint64_t strhash(const char *s)
{
    size_t n = strlen(s), total = n;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0x94d049bb133111ebull;
    return mix64(h ^ total);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, c * elem);
    if (!n)
        return -ENOMEM;
    *p = n;
    *cap = c;
    return 0;
}

int pfr_chenc_new(const pfr_chenc_opts *o, pfr_chenc **out)
{
    pfr_chenc *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    if (o)
        e->o = *o;
    if (e->o.stack_refresh_ns <= 0)
        e->o.stack_refresh_ns = 3600ll * 1000000000;
    if (!e->o.max_stacks)
        e->o.max_stacks = 1u << 20;
    e->gen = 1;
    e->cgen = 1;
    *out = e;
    return 0;
}

void pfr_chenc_free(pfr_chenc *e)
{
    if (!e)
        return;
    free(e->ent);
    free(e->tab);
    free(e->staged);
    pfr_buf_free(&e->samples);
    pfr_buf_free(&e->stacks);
    free(e->smemo);
    free(e->lkeys);
    free(e->atab);
    free(e->slots);
    free(e->vals);
    free(e->frames);
    pfr_buf_free(&e->prefix);
    free(e->prefix_off);
    pfr_buf_free(&e->str);
    free(e->soff);
    free(e);
}

void pfr_chenc_begin(pfr_chenc *e)
{
    pfr_buf_reset(&e->samples);
    pfr_buf_reset(&e->stacks);
    e->sample_rows = e->stack_rows = 0;
    e->nstaged = 0;
    if (++e->gen == 0)
        e->gen = 1;
    /* Forgetting everything only costs stack rows written again; done between batches so no
     * staged entry is lost. */
    if (e->nent >= e->o.max_stacks) {
        e->nent = 0;
        if (e->tab)
            memset(e->tab, 0, (e->tab_mask + 1) * sizeof(*e->tab));
    }
}

const pfr_buf *pfr_chenc_samples(const pfr_chenc *e)
{
    return &e->samples;
}

const pfr_buf *pfr_chenc_stacks(const pfr_chenc *e)
{
    return &e->stacks;
}

uint64_t pfr_chenc_sample_rows(const pfr_chenc *e)
{
    return e->sample_rows;
}

uint64_t pfr_chenc_stack_rows(const pfr_chenc *e)
{
    return e->stack_rows;
}

void pfr_chenc_commit(pfr_chenc *e)
{
    for (size_t i = 0; i < e->nstaged; i++) {
        struct sentry *s = &e->ent[e->staged[i]];
        if (s->staged_gen == e->gen && s->staged_until > s->sent_until)
            s->sent_until = s->staged_until;
        s->staged_gen = 0;
    }
    e->nstaged = 0;
}

void pfr_chenc_discard(pfr_chenc *e)
{
    for (size_t i = 0; i < e->nstaged; i++)
        e->ent[e->staged[i]].staged_gen = 0;
    e->nstaged = 0;
    pfr_buf_reset(&e->samples);
    pfr_buf_reset(&e->stacks);
    e->sample_rows = e->stack_rows = 0;
}

static int tab_rehash(pfr_chenc *e, size_t cap)
{
    uint32_t *t = calloc(cap, sizeof(*t));
    if (!t)
        return -ENOMEM;
    size_t mask = cap - 1;
    for (size_t i = 0; i < e->nent; i++) {
        size_t j = e->ent[i].a & mask;
        while (t[j])
            j = (j + 1) & mask;
        t[j] = (uint32_t)i + 1;
    }
    free(e->tab);
    e->tab = t;
    e->tab_mask = mask;
    return 0;
}

/* The remembered stack with key (a, b), or a new entry for it (hash unknown: *fresh set). */
static struct sentry *stack_lookup(pfr_chenc *e, uint64_t a, uint64_t b, bool *fresh)
{
    if (!e->tab || (e->nent + 1) * 2 > e->tab_mask + 1) {
        size_t cap = e->tab ? (e->tab_mask + 1) * 2 : 1024;
        if (tab_rehash(e, cap) < 0)
            return NULL;
    }
    size_t j = a & e->tab_mask;
    while (e->tab[j]) {
        struct sentry *s = &e->ent[e->tab[j] - 1];
        if (s->a == a && s->b == b) {
            *fresh = false;
            return s;
        }
        j = (j + 1) & e->tab_mask;
    }
    if (e->nent >= UINT32_MAX - 1 ||
        grow((void **)&e->ent, &e->cap_ent, e->nent + 1, sizeof(*e->ent)) < 0)
        return NULL;
    struct sentry *s = &e->ent[e->nent];
    *s = (struct sentry){.a = a, .b = b, .sent_until = INT64_MIN, .staged_until = INT64_MIN};
    e->tab[j] = (uint32_t)++e->nent;
    *fresh = true;
    return s;
}

static uint64_t str_key(pfr_chenc *e, const char *s)
{
    size_t j = ((uintptr_t)s >> 3) * 0x9e3779b97f4a7c15ull >> 20 & e->smemo_mask;
    for (;;) {
        struct smemo *m = &e->smemo[j];
        if (m->gen != e->cgen) {
            m->gen = e->cgen;
            m->ptr = s;
            m->h = strhash(s);
            return m->h;
        }
        if (m->ptr == s)
            return m->h;
        j = (j + 1) & e->smemo_mask;
    }
}

static int frames_of(pfr_chenc *e, const pfr_profile *p, bool sample, uint32_t idx, size_t *n)
{
    for (;;) {
        size_t total = sample ? pfr_profile_sample_frames(p, idx, e->frames, e->cap_frames)
                              : pfr_profile_location_frames(p, idx, e->frames, e->cap_frames);
        if (total <= e->cap_frames) {
            *n = total;
            return 0;
        }
        if (grow((void **)&e->frames, &e->cap_frames, total, sizeof(*e->frames)) < 0)
            return -ENOMEM;
    }
}

static int loc_key(pfr_chenc *e, const pfr_profile *p, uint32_t loc, uint64_t *a, uint64_t *b)
{
    struct lkey *k = &e->lkeys[loc];
    if (k->gen == e->cgen) {
        *a = k->a;
        *b = k->b;
        return 0;
    }
    size_t n;
    if (frames_of(e, p, false, loc, &n) < 0)
        return -ENOMEM;
    uint64_t ha = 0x243f6a8885a308d3ull, hb = 0x13198a2e03707344ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t f = str_key(e, e->frames[i].function), g = str_key(e, e->frames[i].file);
        uint64_t l = (uint64_t)e->frames[i].line;
        ha = comb_a(comb_a(comb_a(ha, f), g), l);
        hb = comb_b(comb_b(comb_b(hb, f), g), l);
    }
    k->a = ha = comb_a(ha, n);
    k->b = hb = comb_b(hb, n);
    k->gen = e->cgen;
    *a = ha;
    *b = hb;
    return 0;
}

/* Size the per-chunk tables for p. */
static int chunk_scratch(pfr_chenc *e, const pfr_profile *p, size_t nsamples, size_t ntypes)
{
    if (++e->cgen == 0) {
        /* Wrapped: stamps from 2^32 chunks ago would look current. */
        e->cgen = 1;
        if (e->smemo)
            memset(e->smemo, 0, (e->smemo_mask + 1) * sizeof(*e->smemo));
        if (e->lkeys)
            memset(e->lkeys, 0, e->cap_lkeys * sizeof(*e->lkeys));
    }
    size_t nstr = pfr_profile_num_strings(p) + 2;
    size_t want = 64;
    while (want < nstr * 2)
        want *= 2;
    if (!e->smemo || e->smemo_mask + 1 < want) {
        struct smemo *m = calloc(want, sizeof(*m));
        if (!m)
            return -ENOMEM;
        free(e->smemo);
        e->smemo = m;
        e->smemo_mask = want - 1;
    }
    size_t nloc = pfr_profile_num_locations(p);
    size_t old = e->cap_lkeys;
    if (grow((void **)&e->lkeys, &e->cap_lkeys, nloc + 1, sizeof(*e->lkeys)) < 0)
        return -ENOMEM;
    if (e->cap_lkeys > old)
        memset(e->lkeys + old, 0, (e->cap_lkeys - old) * sizeof(*e->lkeys));
    size_t acap = 64;
    while (acap < nsamples * 2)
        acap *= 2;
    if (e->atab_cap < acap) {
        free(e->atab);
        e->atab = malloc(acap * sizeof(*e->atab));
        if (!e->atab) {
            e->atab_cap = 0;
            return -ENOMEM;
        }
        e->atab_cap = acap;
    }
    memset(e->atab, 0, acap * sizeof(*e->atab));
    e->nslots = 0;
    if (grow((void **)&e->slots, &e->cap_slots, nsamples + 1, sizeof(*e->slots)) < 0 ||
        grow((void **)&e->vals, &e->cap_vals, (nsamples + 1) * (ntypes + 1), sizeof(*e->vals)) < 0)
        return -ENOMEM;
    return 0;
}

/* Sum sample i into the chunk's distinct stacks. */
static int aggregate(pfr_chenc *e, const pfr_profile *p, size_t i, size_t ntypes, uint64_t svc)
{
    size_t nl;
    const uint32_t *locs = pfr_profile_sample_locations(p, i, &nl);
    uint64_t a = comb_a(0x452821e638d01377ull, svc), b = comb_b(0xbe5466cf34e90c6cull, svc);
    for (size_t k = 0; k < nl; k++) {
        uint64_t la, lb;
        if (loc_key(e, p, locs[k], &la, &lb) < 0)
            return -ENOMEM;
        a = comb_a(a, la);
        b = comb_b(b, lb);
    }
    a = comb_a(a, nl);
    b = comb_b(b, nl);
    const int64_t *v = pfr_profile_sample_values(p, i);
    size_t mask = e->atab_cap - 1, j = a & mask;
    while (e->atab[j]) {
        struct aslot *s = &e->slots[e->atab[j] - 1];
        if (s->a == a && s->b == b) {
            int64_t *acc = &e->vals[(size_t)(s - e->slots) * ntypes];
            for (size_t t = 0; t < ntypes; t++)
                acc[t] += v[t];
            return 0;
        }
        j = (j + 1) & mask;
    }
    size_t n = e->nslots++;
    e->slots[n] = (struct aslot){.a = a, .b = b, .sample = (uint32_t)i};
    memcpy(&e->vals[n * ntypes], v, ntypes * sizeof(*v));
    e->atab[j] = (uint32_t)n + 1;
    return 0;
}

/* Build the Coroot strings of sample i's stack into e->str / e->soff; returns their count and
 * Coroot's StackHash in *hash. */
static int stack_strings(pfr_chenc *e, const pfr_profile *p, uint32_t sample, size_t *count,
                         uint64_t *hash)
{
    size_t n;
    if (frames_of(e, p, true, sample, &n) < 0)
        return -ENOMEM;
    if (grow((void **)&e->soff, &e->cap_soff, n + 1, sizeof(*e->soff)) < 0)
        return -ENOMEM;
    pfr_buf_reset(&e->str);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pfr_coroot_keeps(&e->frames[i]))
            continue;
        pfr_coroot_frame(&e->str, &e->frames[i]);
        e->soff[c++] = e->str.len;
    }
    if (e->str.oom)
        return -ENOMEM;
    *count = c;
    *hash = pfr_fnv1a64(PFR_FNV64_OFFSET, e->str.data, e->str.len);
    return 0;
}

static void put_i64(pfr_buf *b, int64_t v)
{
    pfr_buf_u64le(b, (uint64_t)v);
}

static int stack_row(pfr_chenc *e, const char *service, size_t slen, uint64_t hash,
                     int64_t last_seen, size_t count)
{
    pfr_buf *b = &e->stacks;
    pfr_buf_chstr(b, service, slen);
    pfr_buf_u64le(b, hash);
    put_i64(b, last_seen);
    pfr_buf_uvarint(b, count);
    size_t from = 0;
    for (size_t i = 0; i < count; i++) {
        pfr_buf_chstr(b, (const char *)e->str.data + from, e->soff[i] - from);
        from = e->soff[i];
    }
    e->stack_rows++;
    return b->oom ? -ENOMEM : 0;
}

int pfr_chenc_add(pfr_chenc *e, const pfr_chunk_meta *m, const pfr_profile *p)
{
    if (!m->service || !m->service[0])
        return -EINVAL;
    size_t ntypes = pfr_profile_num_sample_types(p);
    size_t nsamples = pfr_profile_num_samples(p);
    if (nsamples >= UINT32_MAX || chunk_scratch(e, p, nsamples, ntypes) < 0)
        return -ENOMEM;
    size_t slen = strlen(m->service);
    uint64_t svc = strhash(m->service);

    /* The constant head of each sample type's rows. */
    if (grow((void **)&e->prefix_off, &e->cap_prefix_off, ntypes + 1, sizeof(size_t)) < 0)
        return -ENOMEM;
    pfr_buf_reset(&e->prefix);
    for (size_t t = 0; t < ntypes; t++) {
        const char *type = pfr_profile_sample_type(p, t, NULL);
        e->prefix_off[t] = e->prefix.len;
        pfr_buf_chstr(&e->prefix, m->service, slen);
        pfr_buf_chstr(&e->prefix, type ? type : "", type ? strlen(type) : 0);
        put_i64(&e->prefix, m->start_ns);
        put_i64(&e->prefix, m->end_ns);
        pfr_buf_uvarint(&e->prefix, m->nlabels);
        for (size_t l = 0; l < m->nlabels; l++) {
            pfr_buf_chstr(&e->prefix, m->labels[l].key, strlen(m->labels[l].key));
            pfr_buf_chstr(&e->prefix, m->labels[l].value, strlen(m->labels[l].value));
        }
    }
    e->prefix_off[ntypes] = e->prefix.len;
    if (e->prefix.oom)
        return -ENOMEM;

    for (size_t i = 0; i < nsamples; i++)
        if (aggregate(e, p, i, ntypes, svc) < 0)
            return -ENOMEM;

    int64_t last_seen = m->end_ns + e->o.stack_refresh_ns;
    for (size_t s = 0; s < e->nslots; s++) {
        struct aslot *sl = &e->slots[s];
        bool fresh;
        struct sentry *ent = stack_lookup(e, sl->a, sl->b, &fresh);
        if (!ent)
            return -ENOMEM;
        size_t idx = (size_t)(ent - e->ent);
        bool need_row = ent->sent_until < m->end_ns &&
                        !(ent->staged_gen == e->gen && ent->staged_until >= m->end_ns);
        if (fresh || need_row) {
            size_t count;
            uint64_t hash;
            if (stack_strings(e, p, sl->sample, &count, &hash) < 0)
                return -ENOMEM;
            ent = &e->ent[idx];
            ent->hash = hash;
            if (need_row) {
                if (stack_row(e, m->service, slen, hash, last_seen, count) < 0)
                    return -ENOMEM;
                if (ent->staged_gen != e->gen) {
                    if (grow((void **)&e->staged, &e->cap_staged, e->nstaged + 1,
                             sizeof(*e->staged)) < 0)
                        return -ENOMEM;
                    e->staged[e->nstaged++] = (uint32_t)idx;
                    ent->staged_gen = e->gen;
                }
                ent->staged_until = last_seen;
            }
        }
        const int64_t *v = &e->vals[s * ntypes];
        for (size_t t = 0; t < ntypes; t++) {
            size_t from = e->prefix_off[t], to = e->prefix_off[t + 1];
            if (to == from)
                continue;
            const char *type = pfr_profile_sample_type(p, t, NULL);
            if (!type || !type[0])
                continue; /* Coroot ignores sample types without a name */
            pfr_buf_put(&e->samples, e->prefix.data + from, to - from);
            pfr_buf_u64le(&e->samples, ent->hash);
            put_i64(&e->samples, v[t]);
            e->sample_rows++;
        }
    }
    return e->samples.oom || e->stacks.oom ? -ENOMEM : 0;
}
