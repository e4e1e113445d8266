#include "sinks/clickhouse/ch_rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/coroot_conventions.h"
#include "pfr_hash.h"
#include "pfr_vec.h"

/* Bytes a remembered stack takes: its entry (arrays grow by doubling: a third more on average)
 * and its share of the hash table (half full at most, so two to four slots). */
#define SENTRY_BYTES (sizeof(struct sentry) * 4 / 3 + 3 * sizeof(uint32_t))

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
    uint32_t ref; /* a sample index (profile) or a stack index (ring samples) */
};

/* What a chunk's rows come from: a decoded profile, or the ring's samples against the stream's
 * dictionary. */
struct src {
    const pfr_chunk_meta *m;
    const pfr_profile *p;
    const pfr_chunk_samples *v;
};

/* One dictionary's stacks (pfr_store_scan_samples): the content key of each stack met so far. */
struct dkey {
    uint64_t a, b;
    uint32_t gen; /* 0 = not computed yet; the chunk generation for the chunk's own stacks */
};

/* One dictionary location: the content key of its frames and their Coroot strings. */
struct dloc {
    uint64_t a, b;
    uint32_t off, len; /* its strings, as ClickHouse Strings back to back, in dcache.strs */
    uint32_t nstr;
    uint32_t known;
};

struct dcache {
    int64_t dict;
    struct dkey *keys;
    size_t cap;
    struct dloc *locs;
    size_t cap_locs;
    pfr_buf strs;
};

/* A location's key and strings (cached or computed for one use). */
struct locinfo {
    uint64_t a, b;
    const uint8_t *enc;
    size_t len;
    uint32_t nstr;
};

/* A generation of remembered stacks: entries never move (staged holds indices in the young one);
 * tab holds index + 1 (0 = empty). */
struct sgen {
    struct sentry *ent;
    size_t nent, cap_ent;
    uint32_t *tab;
    size_t tab_mask;
};

struct pfr_ch_rows {
    pfr_ch_rows_opts o;
    /* Remembered stacks in two generations: a stack met again while only the old one knows it
     * moves to the young one. Between batches, once the young one holds a quarter of max_ent,
     * the old one is dropped and the young one becomes old (so that a batch of up to half of
     * max_ent distinct stacks finds the last one's); within a batch, the old one is dropped
     * when both hold max_ent together (staged stacks are young). The stacks of recent chunks
     * stay; a stack not met for a while is forgotten (its row is made again if it comes back,
     * and ClickHouse's LastSeen tells whether it goes). */
    struct sgen young, old;
    size_t max_ent;      /* stacks remembered at most */
    struct sentry spare; /* a stack met when there is no room: not remembered */
    uint32_t gen;        /* batch generation, never 0 */
    uint32_t *staged;
    size_t nstaged, cap_staged;

    pfr_ch_columns cols;     /* the open batch's rows (its block, when streamed) */
    pfr_buf samples, stacks; /* their request bodies, rendered on demand */
    bool rendered;

    /* per-chunk scratch */
    uint32_t cgen; /* chunk generation, never 0 */
    struct smemo *smemo;
    size_t smemo_mask;
    struct lkey *lkeys;
    size_t cap_lkeys;
    uint32_t *atab;
    size_t atab_cap;  /* allocated */
    size_t atab_mask; /* this chunk's part of it (cleared), less one */
    struct aslot *slots;
    size_t nslots, cap_slots;
    int64_t *vals;
    size_t cap_vals;
    pfr_frame *frames;
    size_t cap_frames;
    uint64_t *slot_hash; /* StackHash of each distinct stack */
    size_t cap_slot_hash;
    pfr_buf str;  /* stack strings of one stack, back to back */
    size_t *soff; /* their end offsets */
    size_t cap_soff;

    /* per-dictionary stack keys (ring samples path) */
    struct dcache *dicts;
    size_t ndicts, cap_dicts, dict_keys;
    struct dkey *own; /* keys of the chunk's own stacks (above the dictionary) */
    size_t cap_own;
    size_t cur;           /* the current chunk's dictionary (index in dicts) */
    uint32_t stable_locs; /* its locations below this are cached */
    uint64_t dict_bytes;  /* strings cached for dictionaries */
    uint64_t dict_max;    /* dict_bytes and the keys' bytes before the caches are cleared */
    pfr_buf lstr, fstr;   /* a location's strings (not cached), one frame's string */
};

/* Content keys of stacks are two 64-bit lanes (in memory only: cache keys, never sent): lane a
 * mixes with pfr_mix64, lane b with this independent finalizer. */
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
    return pfr_mix64(h * PFR_HASH_GOLDEN ^ x);
}

static inline uint64_t comb_b(uint64_t h, uint64_t x)
{
    return mix64b((h ^ 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full + x);
}

/* A fast content hash of a string (not Coroot's hash: only a cache key, in memory). */
static uint64_t strhash(const char *s)
{
    return pfr_hash_bytes(s, strlen(s));
}

static void sgen_free(struct sgen *g)
{
    free(g->ent);
    free(g->tab);
    memset(g, 0, sizeof(*g));
}

static void dicts_clear(pfr_ch_rows *e)
{
    for (size_t i = 0; i < e->ndicts; i++) {
        free(e->dicts[i].keys);
        free(e->dicts[i].locs);
        pfr_buf_free(&e->dicts[i].strs);
    }
    e->ndicts = 0;
    e->dict_keys = 0;
    e->dict_bytes = 0;
}

int pfr_ch_rows_new(const pfr_ch_rows_opts *o, pfr_ch_rows **out)
{
    pfr_ch_rows *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    if (o)
        e->o = *o;
    if (e->o.stack_refresh_ns <= 0)
        e->o.stack_refresh_ns = 3600ll * 1000000000;
    if (!e->o.cache_bytes)
        e->o.cache_bytes = 64ull << 20;
    /* Three quarters for the stacks; a quarter for the dictionaries, which a streamed batch reads
     * one after the other (what they hold helps the chunks of one dictionary, not the next
     * batch). */
    e->max_ent = e->o.cache_bytes * 3 / 4 / SENTRY_BYTES;
    if (e->max_ent < 4096)
        e->max_ent = 4096;
    e->dict_max = e->o.cache_bytes / 4;
    e->gen = 1;
    e->cgen = 1;
    *out = e;
    return 0;
}

void pfr_ch_rows_free(pfr_ch_rows *e)
{
    if (!e)
        return;
    sgen_free(&e->young);
    sgen_free(&e->old);
    free(e->staged);
    pfr_ch_columns_free(&e->cols);
    pfr_buf_free(&e->samples);
    pfr_buf_free(&e->stacks);
    free(e->smemo);
    free(e->lkeys);
    free(e->atab);
    free(e->slots);
    free(e->vals);
    free(e->frames);
    free(e->slot_hash);
    pfr_buf_free(&e->str);
    free(e->soff);
    dicts_clear(e);
    free(e->dicts);
    free(e->own);
    pfr_buf_free(&e->lstr);
    pfr_buf_free(&e->fstr);
    free(e);
}

void pfr_ch_rows_begin(pfr_ch_rows *e)
{
    pfr_ch_columns_reset(&e->cols);
    e->rendered = false;
    e->nstaged = 0;
    if (++e->gen == 0)
        e->gen = 1;
    /* Between batches, so no staged entry moves. */
    if (e->young.nent >= e->max_ent / 4) {
        sgen_free(&e->old);
        e->old = e->young;
        memset(&e->young, 0, sizeof(e->young));
    }
}

pfr_ch_columns *pfr_ch_rows_cols(pfr_ch_rows *e)
{
    return &e->cols;
}

static void render(pfr_ch_rows *e)
{
    if (e->rendered)
        return;
    enum pfr_ch_format f = e->o.format;
    if (pfr_ch_columns_render_samples(&e->cols, f, &e->samples) < 0)
        e->samples.oom = true;
    if (pfr_ch_columns_render_stacks(&e->cols, f, NULL, &e->stacks) < 0)
        e->stacks.oom = true;
    e->rendered = true;
}

const pfr_buf *pfr_ch_rows_samples(pfr_ch_rows *e)
{
    render(e);
    return &e->samples;
}

const pfr_buf *pfr_ch_rows_stacks(pfr_ch_rows *e)
{
    render(e);
    return &e->stacks;
}

uint64_t pfr_ch_rows_bytes(const pfr_ch_rows *e)
{
    return e->cols.est_samples + e->cols.est_stacks;
}

uint64_t pfr_ch_rows_sample_rows(const pfr_ch_rows *e)
{
    return pfr_ch_columns_sample_rows(&e->cols);
}

uint64_t pfr_ch_rows_stack_rows(const pfr_ch_rows *e)
{
    return pfr_ch_columns_stack_rows(&e->cols);
}

void pfr_ch_rows_commit(pfr_ch_rows *e)
{
    for (size_t i = 0; i < e->nstaged; i++) {
        struct sentry *s = &e->young.ent[e->staged[i]];
        if (s->staged_gen == e->gen && s->staged_until > s->sent_until)
            s->sent_until = s->staged_until;
        s->staged_gen = 0;
    }
    e->nstaged = 0;
}

void pfr_ch_rows_stored(pfr_ch_rows *e, uint32_t tag, int64_t last_seen)
{
    if (!tag || tag > e->young.nent)
        return;
    struct sentry *s = &e->young.ent[tag - 1];
    if (s->staged_gen == e->gen && last_seen < s->staged_until)
        s->staged_until = last_seen;
}

void pfr_ch_rows_discard(pfr_ch_rows *e)
{
    for (size_t i = 0; i < e->nstaged; i++)
        e->young.ent[e->staged[i]].staged_gen = 0;
    e->nstaged = 0;
    pfr_ch_columns_reset(&e->cols);
    e->rendered = false;
}

static int tab_rehash(struct sgen *g, size_t cap)
{
    uint32_t *t = calloc(cap, sizeof(*t));
    if (!t)
        return -ENOMEM;
    size_t mask = cap - 1;
    for (size_t i = 0; i < g->nent; i++) {
        size_t j = g->ent[i].a & mask;
        while (t[j])
            j = (j + 1) & mask;
        t[j] = (uint32_t)i + 1;
    }
    free(g->tab);
    g->tab = t;
    g->tab_mask = mask;
    return 0;
}

/* Key (a, b) in g: its entry's index + 1, or 0 with *slot the empty slot where it would go. */
static uint32_t sgen_find(const struct sgen *g, uint64_t a, uint64_t b, size_t *slot)
{
    if (!g->tab)
        return 0;
    size_t j = a & g->tab_mask;
    while (g->tab[j]) {
        const struct sentry *s = &g->ent[g->tab[j] - 1];
        if (s->a == a && s->b == b)
            return g->tab[j];
        j = (j + 1) & g->tab_mask;
    }
    *slot = j;
    return 0;
}

/* The remembered stack with key (a, b), or a new entry for it (hash unknown: *fresh set). A
 * stack the old generation knows moves to the young one. With no room left, e->spare stands for
 * it during this chunk. NULL on -ENOMEM. */
static struct sentry *stack_lookup(pfr_ch_rows *e, uint64_t a, uint64_t b, bool *fresh)
{
    struct sgen *g = &e->young;
    if (!g->tab || (g->nent + 1) * 2 > g->tab_mask + 1) {
        size_t cap = g->tab ? (g->tab_mask + 1) * 2 : 1024;
        if (tab_rehash(g, cap) < 0)
            return NULL;
    }
    size_t j = 0, k = 0;
    uint32_t i = sgen_find(g, a, b, &j);
    if (i) {
        *fresh = false;
        return &g->ent[i - 1];
    }
    uint32_t o = sgen_find(&e->old, a, b, &k);
    struct sentry n =
        o ? e->old.ent[o - 1]
          : (struct sentry){.a = a, .b = b, .sent_until = INT64_MIN, .staged_until = INT64_MIN};
    n.staged_gen = 0;
    *fresh = !o;
    if (g->nent >= e->max_ent || g->nent >= UINT32_MAX - 1) {
        e->spare = n;
        return &e->spare;
    }
    if (g->nent + e->old.nent >= e->max_ent)
        sgen_free(&e->old);
    if (pfr_vec_grow(&g->ent, &g->cap_ent, g->nent + 1, sizeof(*g->ent)) < 0)
        return NULL;
    g->ent[g->nent] = n;
    g->tab[j] = (uint32_t)++g->nent;
    return &g->ent[g->nent - 1];
}

static uint64_t str_key(pfr_ch_rows *e, const char *s)
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

/* Frames of a sample (profile) or of a stack (ring samples), or of one location (loc set). */
static int frames_of(pfr_ch_rows *e, const struct src *src, bool loc, uint32_t idx, size_t *n)
{
    for (;;) {
        size_t total;
        if (src->p)
            total = loc ? pfr_profile_location_frames(src->p, idx, e->frames, e->cap_frames)
                        : pfr_profile_sample_frames(src->p, idx, e->frames, e->cap_frames);
        else
            total = loc ? pfr_samples_location_frames(src->v, idx, e->frames, e->cap_frames)
                        : pfr_samples_stack_frames(src->v, idx, e->frames, e->cap_frames);
        if (total <= e->cap_frames) {
            *n = total;
            return 0;
        }
        if (pfr_vec_grow(&e->frames, &e->cap_frames, total, sizeof(*e->frames)) < 0)
            return -ENOMEM;
    }
}

/* The content key of the n frames in e->frames (function, file, line of each). */
static void key_of_frames(pfr_ch_rows *e, size_t n, bool memo, uint64_t *a, uint64_t *b)
{
    uint64_t ha = 0x243f6a8885a308d3ull, hb = 0x13198a2e03707344ull;
    for (size_t i = 0; i < n; i++) {
        const pfr_frame *fr = &e->frames[i];
        uint64_t f = memo ? str_key(e, fr->function) : strhash(fr->function);
        uint64_t g = memo ? str_key(e, fr->file) : strhash(fr->file);
        uint64_t l = (uint64_t)fr->line;
        ha = comb_a(comb_a(comb_a(ha, f), g), l);
        hb = comb_b(comb_b(comb_b(hb, f), g), l);
    }
    *a = comb_a(ha, n);
    *b = comb_b(hb, n);
}

/* The content key of a location's frames. */
static int frames_key(pfr_ch_rows *e, const struct src *src, uint32_t loc, bool memo, uint64_t *a,
                      uint64_t *b)
{
    size_t n;
    if (frames_of(e, src, true, loc, &n) < 0)
        return -ENOMEM;
    key_of_frames(e, n, memo, a, b);
    return 0;
}

static int loc_key(pfr_ch_rows *e, const pfr_profile *p, uint32_t loc, uint64_t *a, uint64_t *b)
{
    struct lkey *k = &e->lkeys[loc];
    if (k->gen != e->cgen) {
        struct src src = {.p = p};
        if (frames_key(e, &src, loc, true, &k->a, &k->b) < 0)
            return -ENOMEM;
        k->gen = e->cgen;
    }
    *a = k->a;
    *b = k->b;
    return 0;
}

/* The per-chunk memos of strings and locations of profile p. */
static int profile_scratch(pfr_ch_rows *e, const pfr_profile *p)
{
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
    if (pfr_vec_grow(&e->lkeys, &e->cap_lkeys, nloc + 1, sizeof(*e->lkeys)) < 0)
        return -ENOMEM;
    if (e->cap_lkeys > old)
        memset(e->lkeys + old, 0, (e->cap_lkeys - old) * sizeof(*e->lkeys));
    return 0;
}

/* Size the per-chunk tables; p (may be NULL) gets its memos too. */
static int chunk_scratch(pfr_ch_rows *e, const pfr_profile *p, size_t nsamples, size_t ntypes)
{
    if (++e->cgen == 0) {
        /* Wrapped: stamps from 2^32 chunks ago would look current. */
        e->cgen = 1;
        if (e->smemo)
            memset(e->smemo, 0, (e->smemo_mask + 1) * sizeof(*e->smemo));
        if (e->lkeys)
            memset(e->lkeys, 0, e->cap_lkeys * sizeof(*e->lkeys));
        if (e->own)
            memset(e->own, 0, e->cap_own * sizeof(*e->own));
    }
    if (p && profile_scratch(e, p) < 0)
        return -ENOMEM;
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
    /* Only the part cleared is probed: past it lie a bigger chunk's entries, naming slots this
     * chunk has not filled (a stack met there again would be summed into a dead slot). */
    memset(e->atab, 0, acap * sizeof(*e->atab));
    e->atab_mask = acap - 1;
    e->nslots = 0;
    if (pfr_vec_grow(&e->slots, &e->cap_slots, nsamples + 1, sizeof(*e->slots)) < 0 ||
        pfr_vec_grow(&e->vals, &e->cap_vals, (nsamples + 1) * (ntypes + 1), sizeof(*e->vals)) < 0)
        return -ENOMEM;
    return 0;
}

/* Sum values v of a stack with content key (a, b) into the chunk's distinct stacks; ref names
 * the stack for its strings. */
static void accumulate(pfr_ch_rows *e, uint64_t a, uint64_t b, const int64_t *v, size_t ntypes,
                       uint32_t ref)
{
    size_t mask = e->atab_mask, j = a & mask;
    while (e->atab[j]) {
        struct aslot *s = &e->slots[e->atab[j] - 1];
        if (s->a == a && s->b == b) {
            int64_t *acc = &e->vals[(size_t)(s - e->slots) * ntypes];
            for (size_t t = 0; t < ntypes; t++)
                acc[t] += v[t];
            return;
        }
        j = (j + 1) & mask;
    }
    size_t n = e->nslots++;
    e->slots[n] = (struct aslot){.a = a, .b = b, .ref = ref};
    memcpy(&e->vals[n * ntypes], v, ntypes * sizeof(*v));
    e->atab[j] = (uint32_t)n + 1;
}

/* Sum sample i of profile p into the chunk's distinct stacks. */
static int aggregate(pfr_ch_rows *e, const pfr_profile *p, size_t i, size_t ntypes, uint64_t svc)
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
    accumulate(e, a, b, pfr_profile_sample_values(p, i), ntypes, (uint32_t)i);
    return 0;
}

/* Append the Coroot strings (ClickHouse Strings) of the frames in e->frames to b. */
static uint32_t frames_strings(pfr_ch_rows *e, size_t n, pfr_buf *b)
{
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pfr_coroot_keeps(&e->frames[i]))
            continue;
        pfr_buf_reset(&e->fstr);
        pfr_coroot_frame(&e->fstr, &e->frames[i]);
        pfr_ch_string(b, (const char *)e->fstr.data, e->fstr.len);
        c++;
    }
    return c;
}

/* Key and strings of a location of ring samples: cached for the dictionary's locations. */
static int loc_info(pfr_ch_rows *e, const struct src *src, uint32_t loc, struct locinfo *out)
{
    struct dcache *d = &e->dicts[e->cur];
    bool stable = loc < e->stable_locs;
    if (stable) {
        size_t old = d->cap_locs;
        if (pfr_vec_grow(&d->locs, &d->cap_locs, (size_t)e->stable_locs, sizeof(*d->locs)) < 0)
            return -ENOMEM;
        if (d->cap_locs > old)
            memset(d->locs + old, 0, (d->cap_locs - old) * sizeof(*d->locs));
        struct dloc *l = &d->locs[loc];
        if (l->known) {
            *out = (struct locinfo){l->a, l->b, d->strs.data + l->off, l->len, l->nstr};
            return 0;
        }
    }
    pfr_buf *b = stable ? &d->strs : &e->lstr;
    if (!stable)
        pfr_buf_reset(b);
    size_t from = b->len, n;
    if (frames_of(e, src, true, loc, &n) < 0)
        return -ENOMEM;
    key_of_frames(e, n, false, &out->a, &out->b);
    out->nstr = frames_strings(e, n, b);
    if (b->oom || b->len > UINT32_MAX)
        return -ENOMEM;
    out->enc = b->data + from;
    out->len = b->len - from;
    if (stable) {
        d->locs[loc] =
            (struct dloc){out->a, out->b, (uint32_t)from, (uint32_t)out->len, out->nstr, 1};
        e->dict_bytes += out->len + sizeof(struct dloc);
    }
    return 0;
}

/* The content key of a stack of ring samples: the same key aggregate() gives the same frames. */
static int view_stack_key(pfr_ch_rows *e, const struct src *src, uint32_t stack, uint64_t svc,
                          struct dkey *k)
{
    size_t nl;
    const uint32_t *locs = pfr_samples_stack_locations(src->v, stack, &nl);
    uint64_t a = comb_a(0x452821e638d01377ull, svc), b = comb_b(0xbe5466cf34e90c6cull, svc);
    for (size_t j = 0; j < nl; j++) {
        struct locinfo li;
        if (loc_info(e, src, locs[j], &li) < 0)
            return -ENOMEM;
        a = comb_a(a, li.a);
        b = comb_b(b, li.b);
    }
    k->a = comb_a(a, nl);
    k->b = comb_b(b, nl);
    return 0;
}

/* FNV-1a over the bytes of ClickHouse Strings (their lengths excluded), continuing from h. */
static uint64_t fnv_strings(uint64_t h, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t n = 0;
        for (int shift = 0; p < end; shift += 7) {
            uint8_t c = *p++;
            n |= (uint64_t)(c & 0x7f) << shift;
            if (!(c & 0x80))
                break;
        }
        h = pfr_hash_fnv1a(h, p, (size_t)n);
        p += n;
    }
    return h;
}

/* The Coroot strings of a stack of ring samples, as ClickHouse Strings, into e->str (from the
 * locations' cached strings); *count gets their number and *hash the StackHash. */
static int view_stack_strings(pfr_ch_rows *e, const struct src *src, uint32_t stack, size_t *count,
                              uint64_t *hash)
{
    size_t nl;
    const uint32_t *locs = pfr_samples_stack_locations(src->v, stack, &nl);
    pfr_buf_reset(&e->str);
    size_t c = 0;
    for (size_t j = 0; j < nl; j++) {
        struct locinfo li;
        if (loc_info(e, src, locs[j], &li) < 0)
            return -ENOMEM;
        pfr_buf_put(&e->str, li.enc, li.len);
        c += li.nstr;
    }
    if (e->str.oom)
        return -ENOMEM;
    *count = c;
    *hash = fnv_strings(PFR_HASH_FNV_OFFSET, e->str.data, e->str.len);
    return 0;
}

/* The key cache of dictionary dict, created empty if new. */
static struct dcache *dict_cache(pfr_ch_rows *e, int64_t dict)
{
    for (size_t i = e->ndicts; i-- > 0;)
        if (e->dicts[i].dict == dict)
            return &e->dicts[i];
    if (pfr_vec_grow(&e->dicts, &e->cap_dicts, e->ndicts + 1, sizeof(*e->dicts)) < 0)
        return NULL;
    struct dcache *d = &e->dicts[e->ndicts++];
    *d = (struct dcache){.dict = dict};
    return d;
}

/* The cached key slot of a stack: in the dictionary's cache below stable, else the chunk's. */
static struct dkey *stack_slot(pfr_ch_rows *e, struct dcache *d, uint32_t stable, uint32_t stack)
{
    size_t old;
    if (stack < stable) {
        old = d->cap;
        if (pfr_vec_grow(&d->keys, &d->cap, (size_t)stable, sizeof(*d->keys)) < 0)
            return NULL;
        if (d->cap > old)
            memset(d->keys + old, 0, (d->cap - old) * sizeof(*d->keys));
        e->dict_keys += d->cap - old;
        return &d->keys[stack];
    }
    old = e->cap_own;
    if (pfr_vec_grow(&e->own, &e->cap_own, (size_t)(stack - stable) + 1, sizeof(*e->own)) < 0)
        return NULL;
    if (e->cap_own > old)
        memset(e->own + old, 0, (e->cap_own - old) * sizeof(*e->own));
    struct dkey *k = &e->own[stack - stable];
    if (k->gen != e->cgen)
        k->gen = 0; /* another chunk's stack of that index */
    return k;
}

/* Sum the ring samples of a chunk into its distinct stacks. */
static int aggregate_view(pfr_ch_rows *e, const struct src *src, size_t ntypes, uint64_t svc)
{
    uint32_t stable;
    struct dcache *d = dict_cache(e, pfr_samples_dict(src->v, &stable, &e->stable_locs));
    if (!d)
        return -ENOMEM;
    e->cur = (size_t)(d - e->dicts);
    size_t n = pfr_samples_count(src->v);
    for (size_t i = 0; i < n; i++) {
        uint32_t stack = pfr_samples_stack(src->v, i);
        struct dkey *k = stack_slot(e, d, stable, stack);
        if (!k)
            return -ENOMEM;
        if (!k->gen) {
            if (view_stack_key(e, src, stack, svc, k) < 0)
                return -ENOMEM;
            k->gen = stack < stable ? 1 : e->cgen;
        }
        accumulate(e, k->a, k->b, pfr_samples_values(src->v, i), ntypes, stack);
    }
    return 0;
}

/* Build the Coroot strings of a slot's stack into e->str / e->soff; returns their count and
 * Coroot's StackHash in *hash. */
static int stack_strings(pfr_ch_rows *e, const struct src *src, uint32_t ref, size_t *count,
                         uint64_t *hash)
{
    size_t n;
    if (frames_of(e, src, false, ref, &n) < 0)
        return -ENOMEM;
    if (pfr_vec_grow(&e->soff, &e->cap_soff, n + 1, sizeof(*e->soff)) < 0)
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
    *hash = pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, e->str.data, e->str.len);
    return 0;
}

static int stack_row(pfr_ch_rows *e, const char *service, uint64_t hash, int64_t last_seen,
                     size_t count)
{
    if (pfr_ch_columns_stack(&e->cols, service, hash, last_seen) < 0)
        return -ENOMEM;
    size_t from = 0;
    for (size_t i = 0; i < count; i++) {
        pfr_ch_columns_stack_str(&e->cols, (const char *)e->str.data + from, e->soff[i] - from);
        from = e->soff[i];
    }
    return e->cols.err;
}

/* A stack row whose strings are in e->str already as ClickHouse Strings. */
static int stack_row_enc(pfr_ch_rows *e, const char *service, uint64_t hash, int64_t last_seen,
                         size_t count)
{
    if (pfr_ch_columns_stack(&e->cols, service, hash, last_seen) < 0)
        return -ENOMEM;
    pfr_ch_columns_stack_enc(&e->cols, e->str.data, e->str.len, count);
    return e->cols.err;
}

static const char *type_name(const struct src *src, size_t t)
{
    if (src->p)
        return pfr_profile_sample_type(src->p, t, NULL);
    return t < src->m->ntypes ? src->m->types[t] : NULL;
}

/* The remembered entry of a slot's stack, with a stack row staged if the stack is new or its
 * row's LastSeen falls short of this chunk. */
static struct sentry *slot_stack(pfr_ch_rows *e, const struct src *src, const struct aslot *sl)
{
    const pfr_chunk_meta *m = src->m;
    bool fresh;
    struct sentry *ent = stack_lookup(e, sl->a, sl->b, &fresh);
    if (!ent)
        return NULL;
    bool spare = ent == &e->spare;
    size_t idx = spare ? 0 : (size_t)(ent - e->young.ent);
    bool need_row = ent->sent_until < m->end_ns &&
                    !(ent->staged_gen == e->gen && ent->staged_until >= m->end_ns);
    if (!fresh && !need_row)
        return ent;
    size_t count;
    uint64_t hash;
    int rc = src->v ? view_stack_strings(e, src, sl->ref, &count, &hash)
                    : stack_strings(e, src, sl->ref, &count, &hash);
    if (rc < 0)
        return NULL;
    ent = spare ? &e->spare : &e->young.ent[idx];
    ent->hash = hash;
    if (!need_row)
        return ent;
    int64_t last_seen = m->end_ns + e->o.stack_refresh_ns;
    if (src->v ? stack_row_enc(e, m->service, hash, last_seen, count) < 0
               : stack_row(e, m->service, hash, last_seen, count) < 0)
        return NULL;
    e->cols.strows[e->cols.nstrows - 1].tag = spare ? 0 : (uint32_t)idx + 1;
    if (spare)
        return ent; /* not remembered: a later chunk writes its row again */
    if (ent->staged_gen != e->gen) {
        if (pfr_vec_grow(&e->staged, &e->cap_staged, e->nstaged + 1, sizeof(*e->staged)) < 0)
            return NULL;
        e->staged[e->nstaged++] = (uint32_t)idx;
        ent->staged_gen = e->gen;
    }
    ent->staged_until = last_seen;
    return ent;
}

/* The rows of the chunk's distinct stacks (aggregated into e->slots / e->vals): stack rows as
 * needed, then one group of sample rows per named sample type. */
static int emit_rows(pfr_ch_rows *e, const struct src *src, size_t ntypes)
{
    const pfr_chunk_meta *m = src->m;
    e->rendered = false;
    if (pfr_vec_grow(&e->slot_hash, &e->cap_slot_hash, e->nslots + 1, sizeof(*e->slot_hash)) < 0)
        return -ENOMEM;
    for (size_t s = 0; s < e->nslots; s++) {
        struct sentry *ent = slot_stack(e, src, &e->slots[s]);
        if (!ent)
            return -ENOMEM;
        e->slot_hash[s] = ent->hash;
    }
    uint32_t lab = pfr_ch_columns_labels(&e->cols, m->labels, m->nlabels);
    for (size_t t = 0; t < ntypes && e->nslots; t++) {
        const char *type = type_name(src, t);
        if (!type || !type[0])
            continue; /* Coroot ignores sample types without a name */
        uint64_t *hashes;
        int64_t *values;
        if (pfr_ch_columns_group(&e->cols, m->service, type, m->start_ns, m->end_ns, lab,
                                 (uint32_t)m->nlabels, e->nslots, &hashes, &values) < 0)
            return -ENOMEM;
        memcpy(hashes, e->slot_hash, e->nslots * sizeof(*hashes));
        for (size_t s = 0; s < e->nslots; s++)
            values[s] = e->vals[s * ntypes + t];
    }
    return e->cols.err;
}

int pfr_ch_rows_add(pfr_ch_rows *e, const pfr_chunk_meta *m, const pfr_profile *p)
{
    if (!m->service || !m->service[0])
        return -EINVAL;
    struct src src = {.m = m, .p = p};
    size_t ntypes = pfr_profile_num_sample_types(p);
    size_t nsamples = pfr_profile_num_samples(p);
    if (nsamples >= UINT32_MAX || chunk_scratch(e, p, nsamples, ntypes) < 0)
        return -ENOMEM;
    uint64_t svc = strhash(m->service);
    for (size_t i = 0; i < nsamples; i++)
        if (aggregate(e, p, i, ntypes, svc) < 0)
            return -ENOMEM;
    return emit_rows(e, &src, ntypes);
}

int pfr_ch_rows_add_samples(pfr_ch_rows *e, const pfr_chunk_meta *m, const pfr_chunk_samples *v)
{
    if (!m->service || !m->service[0])
        return -EINVAL;
    struct src src = {.m = m, .v = v};
    size_t ntypes = m->ntypes;
    /* Between chunks, where no cached entry is in use. */
    if (e->dict_bytes + e->dict_keys * sizeof(struct dkey) >= e->dict_max)
        dicts_clear(e);
    size_t nsamples = pfr_samples_count(v);
    if (nsamples >= UINT32_MAX || chunk_scratch(e, NULL, nsamples, ntypes) < 0)
        return -ENOMEM;
    if (aggregate_view(e, &src, ntypes, strhash(m->service)) < 0)
        return -ENOMEM;
    return emit_rows(e, &src, ntypes);
}
