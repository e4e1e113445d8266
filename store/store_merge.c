/*
 * The merger (layer 4, internal): decoded chunks of any chains accumulated into one profile, per
 * (stack, label set), each chain's entries mapped once. Both the readers' merge
 * (pfr_store_merge: a flame graph over a range, prorating rolled-up chunks the range covers in
 * part) and retention's roll-up (store_retention.c: consecutive chunks of a stream into one,
 * the averaged types weighted by each chunk's duration) use it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_build.h"
#include "store_merge.h"

void pfr_st_merger_free(struct store_merger *m)
{
    pfr_profile_free(m->p);
    free(m->tmap);
    pfr_st_ktab_free(&m->stacks);
    pfr_st_ktab_free(&m->lsets);
    pfr_map_free(&m->acc);
    free(m->vals);
    free(m->keys);
    free(m->gacc);
    free(m->gauge);
    for (size_t i = 0; i < m->nmd; i++) {
        free(m->md[i].loc);
        free(m->md[i].stack);
        free(m->md[i].lset);
        free(m->md[i].func);
        free(m->md[i].map);
    }
    free(m->md);
    pfr_map_free(&m->md_idx);
    free(m->dloc);
    free(m->dstack);
    free(m->dlset);
    free(m->lines);
    free(m->labels);
    pfr_buf_free(&m->key);
}

static int zeroed(uint32_t **v, size_t *cap, size_t n)
{
    if (VEC_RESERVE(*v, *cap, n ? n : 1))
        return -ENOMEM;
    memset(*v, 0, n * sizeof(**v));
    return 0;
}

/* Grow a map to n entries; new entries are unmapped. */
static int grown(uint32_t **v, size_t *cap, size_t n)
{
    size_t old = *cap;
    if (n <= old)
        return 0;
    if (VEC_RESERVE(*v, *cap, n))
        return -ENOMEM;
    memset(*v + old, 0, (*cap - old) * sizeof(**v));
    return 0;
}

static struct mdict *mdict_get(struct store_merger *m, const struct chain *ch)
{
    bool found;
    uint32_t i = store_map_put(&m->md_idx, (uint64_t)ch->base_id, (uint32_t)m->nmd, &found);
    if (i == UINT32_MAX)
        return NULL;
    struct mdict *x;
    if (found) {
        x = &m->md[i];
    } else {
        if (VEC_RESERVE(m->md, m->cap_md, m->nmd + 1))
            return NULL;
        x = &m->md[m->nmd++];
        memset(x, 0, sizeof(*x));
        x->id = ch->base_id;
    }
    /* The chain may have grown since (new layers). */
    if (grown(&x->loc, &x->cap_loc, ch->t.t[T_LOC].n) ||
        grown(&x->stack, &x->cap_stack, ch->t.t[T_STACK].n) ||
        grown(&x->lset, &x->cap_lset, ch->t.t[T_LSET].n) ||
        grown(&x->func, &x->cap_func, ch->t.t[T_FUNC].n) ||
        grown(&x->map, &x->cap_map, ch->t.t[T_STR].n))
        return NULL;
    return x;
}

/* A function of the chunk's view as an output function (cached per chain). */
static int64_t m_func(struct store_merger *m, struct mdict *md, const struct tabs *d,
                      const struct dchunk *c, uint32_t fn)
{
    uint32_t *slot = fn < c->base[T_FUNC] ? &md->func[fn] : NULL;
    if (slot && *slot)
        return *slot - 1;
    size_t len;
    const struct nfunc *f = (const struct nfunc *)tabs2_key(d, &c->delta, T_FUNC, fn, &len);
    const char *name = pfr_st_str_at(d, &c->delta, f->name);
    int64_t x = pfr_profile_add_function(m->p, name, name, pfr_st_str_at(d, &c->delta, f->file), 0);
    if (x >= 0 && slot)
        *slot = (uint32_t)x + 1;
    return x;
}

/* A module string of the chunk's view as an output mapping in *out, -1 for none (cached per
 * chain). 0 or a negative errno. */
static int m_map(struct store_merger *m, struct mdict *md, const struct tabs *d,
                 const struct dchunk *c, uint32_t str, int64_t *out)
{
    uint32_t *slot = str < c->base[T_STR] ? &md->map[str] : NULL;
    if (slot && *slot) {
        *out = (int64_t)*slot - 2;
        return 0;
    }
    const char *module = pfr_st_str_at(d, &c->delta, str);
    int64_t x = -1;
    if (module[0] && (x = pfr_profile_add_mapping(m->p, 0, 0, 0, module, "")) < 0)
        return (int)x;
    if (slot)
        *slot = (uint32_t)(x + 2);
    *out = x;
    return 0;
}

/* As add_loc (the same calls on the output profile, in the same order, less the lookups of
 * functions and mappings it already made). */
static int64_t m_add_loc(struct store_merger *m, struct mdict *md, const struct tabs *d,
                         const struct dchunk *c, uint32_t loc)
{
    size_t len;
    const struct nloc *l = (const struct nloc *)tabs2_key(d, &c->delta, T_LOC, loc, &len);
    const struct nline *ln = (const struct nline *)(l + 1);
    if (VEC_RESERVE(m->lines, m->cap_lines, l->nlines ? l->nlines : 1))
        return -ENOMEM;
    for (uint32_t i = 0; i < l->nlines; i++) {
        int64_t fi = m_func(m, md, d, c, ln[i].func);
        if (fi < 0)
            return fi;
        m->lines[i] = (pfr_line){(uint32_t)fi, ln[i].line};
    }
    int64_t mp = -1; /* set by m_map on success */
    int rc = m_map(m, md, d, c, l->module, &mp);
    if (rc)
        return rc;
    return pfr_profile_add_location(m->p, mp, l->addr, m->lines, l->nlines);
}

static int64_t m_loc(struct store_merger *m, struct mdict *md, const struct tabs *d,
                     const struct dchunk *c, uint32_t loc)
{
    uint32_t *slot = loc < c->base[T_LOC] ? &md->loc[loc] : &m->dloc[loc - c->base[T_LOC]];
    if (*slot)
        return *slot - 1;
    int64_t x = m_add_loc(m, md, d, c, loc);
    if (x >= 0)
        *slot = (uint32_t)x + 1;
    return x;
}

static int64_t m_stack(struct store_merger *m, struct mdict *md, const struct tabs *d,
                       const struct dchunk *c, uint32_t st)
{
    uint32_t *slot = st < c->base[T_STACK] ? &md->stack[st] : &m->dstack[st - c->base[T_STACK]];
    if (*slot)
        return *slot - 1;
    size_t len;
    const uint32_t *locs = (const uint32_t *)tabs2_key(d, &c->delta, T_STACK, st, &len);
    m->key.len = 0;
    for (size_t j = 0; j < len / 4; j++) {
        int64_t x = m_loc(m, md, d, c, locs[j]);
        if (x < 0)
            return x;
        uint32_t o = (uint32_t)x;
        pfr_buf_put(&m->key, &o, sizeof(o));
    }
    if (pfr_buf_err(&m->key))
        return pfr_buf_err(&m->key);
    int64_t id = pfr_st_ktab_intern(&m->stacks, m->key.data, m->key.len, NULL);
    if (id >= 0)
        *slot = (uint32_t)id + 1;
    return id;
}

/* Label set ls as an output id, or LS_FILTERED when the sample label filter drops it. */
static int64_t m_lset(struct store_merger *m, struct mdict *md, const struct tabs *d,
                      const struct dchunk *c, uint32_t ls)
{
    uint32_t *slot = ls < c->base[T_LSET] ? &md->lset[ls] : &m->dlset[ls - c->base[T_LSET]];
    if (*slot)
        return *slot == LS_FILTERED ? LS_FILTERED : *slot - 1;
    if (m->f && m->f->nsample_labels && !pfr_st_lset_matches(d, &c->delta, ls, m->f)) {
        *slot = LS_FILTERED;
        return LS_FILTERED;
    }
    int64_t id = 0;
    if (!(m->flags & PFR_MERGE_DROP_LABELS)) {
        size_t len;
        const struct nlabel *l = (const struct nlabel *)tabs2_key(d, &c->delta, T_LSET, ls, &len);
        m->key.len = 0;
        for (size_t j = 0; j < len / sizeof(*l); j++) {
            const char *k = pfr_st_str_at(d, &c->delta, l[j].key);
            pfr_buf_put(&m->key, k, strlen(k) + 1);
            if (l[j].str != LABEL_NUM) {
                const char *v = pfr_st_str_at(d, &c->delta, l[j].str);
                pfr_buf_u8(&m->key, 's');
                pfr_buf_put(&m->key, v, strlen(v) + 1);
            } else {
                const char *u = l[j].unit ? pfr_st_str_at(d, &c->delta, l[j].unit) : "";
                pfr_buf_u8(&m->key, 'n');
                pfr_buf_put(&m->key, &l[j].num, sizeof(l[j].num));
                pfr_buf_put(&m->key, u, strlen(u) + 1);
            }
        }
        if (pfr_buf_err(&m->key))
            return pfr_buf_err(&m->key);
        id = pfr_st_ktab_intern(&m->lsets, m->key.data, m->key.len, NULL);
        if (id < 0)
            return id;
    }
    *slot = (uint32_t)id + 1;
    return id;
}

static void m_header(struct store_merger *m, const struct tabs *d, const struct dchunk *c)
{
    const char *pt = pfr_st_str_at(d, &c->delta, c->period_type);
    const char *pu = pfr_st_str_at(d, &c->delta, c->period_unit);
    if (!m->have_period && (c->period || pt[0] || pu[0])) {
        pfr_profile_set_period(m->p, pt, pu, c->period);
        m->have_period = true;
    }
    if (!c->time_nanos && !c->duration)
        return;
    if (!m->have_time) {
        pfr_profile_set_time(m->p, c->time_nanos, c->duration);
        m->have_time = true;
        return;
    }
    int64_t t0 = pfr_profile_time_nanos(m->p), d0 = pfr_profile_duration_nanos(m->p);
    int64_t e0, e1, start = t0 < c->time_nanos ? t0 : c->time_nanos, dur;
    if (__builtin_add_overflow(t0, d0, &e0))
        e0 = d0 > 0 ? INT64_MAX : INT64_MIN;
    if (__builtin_add_overflow(c->time_nanos, c->duration, &e1))
        e1 = c->duration > 0 ? INT64_MAX : INT64_MIN;
    int64_t end = e0 > e1 ? e0 : e1;
    if (__builtin_sub_overflow(end, start, &dur))
        dur = INT64_MAX;
    pfr_profile_set_time(m->p, start, dur);
}

/* The chain's tables as of chunk c's layer: the chain may hold later layers already, and the
 * chunk's own entries are numbered from its layer's counts. */
static void chunk_view(const struct tabs *chain, const struct dchunk *c, struct tabs *out)
{
    *out = *chain;
    for (int k = 0; k < T_N; k++)
        out->t[k].n = c->base[k];
}

/* The duration-weighted accumulators of averaged types, zeroed as they grow. */
static int m_gacc_grow(struct store_merger *m, size_t nacc)
{
    size_t old = m->cap_gacc;
    if (nacc * m->nout <= old)
        return 0;
    if (VEC_RESERVE(m->gacc, m->cap_gacc, nacc * m->nout))
        return -ENOMEM;
    memset(m->gacc + old, 0, (m->cap_gacc - old) * sizeof(*m->gacc));
    return 0;
}

/* Add a sample's values into accumulator a: whole (the exact path), prorated by w's share, or,
 * for the averaged types of a roll-up, weighted by the chunk's duration (pfr_st_merger_finish
 * divides by the total). */
static int m_add(struct store_merger *m, uint32_t a, const int64_t *v, size_t ntypes,
                 const struct store_weight *w)
{
    int64_t *acc = &m->vals[(size_t)a * m->nout];
    bool whole = !w || w->num == w->den;
    if (m->gauge && w && w->dur > 0 && m_gacc_grow(m, (size_t)a + 1))
        return -ENOMEM;
    for (size_t t = 0; t < ntypes; t++) {
        int o = m->tmap[t];
        if (o < 0)
            continue;
        if (m->gauge && m->gauge[o] && w && w->dur > 0) {
            m->gacc[(size_t)a * m->nout + (size_t)o] += (double)v[t] * (double)w->dur;
            continue;
        }
        int64_t x = whole ? v[t] : llround((double)v[t] * (double)w->num / (double)w->den);
        acc[o] = (int64_t)((uint64_t)acc[o] + (uint64_t)x);
    }
    return 0;
}

int pfr_st_merger_chunk(struct store_merger *m, const struct rstream *r, const struct chain *de,
                        const struct dchunk *c, const struct store_weight *w)
{
    struct tabs view;
    chunk_view(&de->t, c, &view);
    const struct tabs *d = &view;
    struct mdict *md = mdict_get(m, de);
    if (!md || zeroed(&m->dloc, &m->cap_dloc, c->delta.t[T_LOC].n) ||
        zeroed(&m->dstack, &m->cap_dstack, c->delta.t[T_STACK].n) ||
        zeroed(&m->dlset, &m->cap_dlset, c->delta.t[T_LSET].n) ||
        VEC_RESERVE(m->tmap, m->cap_tmap, r->ntypes))
        return -ENOMEM;
    bool any = false;
    for (size_t t = 0; t < r->ntypes; t++) {
        m->tmap[t] = -1;
        for (size_t o = 0; o < m->nout; o++) {
            const char *unit;
            if (strcmp(pfr_profile_sample_type(m->p, o, &unit), r->types[t]) == 0) {
                m->tmap[t] = (int)o;
                any = true;
                break;
            }
        }
    }
    if (!any)
        return 0;
    m_header(m, d, c);
    bool drop = m->flags & PFR_MERGE_DROP_LABELS;
    for (size_t i = 0; i < c->nsamples; i++) {
        int64_t lid = m_lset(m, md, d, c, c->lset[i]);
        if (lid == LS_FILTERED)
            continue;
        int64_t sid = m_stack(m, md, d, c, c->stack[i]);
        if (lid < 0 || sid < 0)
            return lid < 0 ? (int)lid : (int)sid;
        uint64_t key = (uint64_t)sid << 32 | (uint64_t)lid;
        uint32_t a;
        if (drop) {
            /* One label set: the stack id is the accumulator (stacks are numbered in the order
             * of their first sample, as accumulators would be). */
            a = (uint32_t)sid;
        } else {
            bool found;
            a = store_map_put(&m->acc, key, (uint32_t)m->nacc, &found);
            if (a == UINT32_MAX)
                return -ENOMEM;
        }
        if (a >= m->nacc) {
            if (VEC_RESERVE(m->vals, m->cap_vals, ((size_t)a + 1) * m->nout) ||
                VEC_RESERVE(m->keys, m->cap_keys, (size_t)a + 1))
                return -ENOMEM;
            memset(&m->vals[m->nacc * m->nout], 0,
                   ((size_t)a + 1 - m->nacc) * m->nout * sizeof(*m->vals));
            for (; m->nacc <= a; m->nacc++)
                m->keys[m->nacc] = drop ? (uint64_t)m->nacc << 32 : key;
        }
        if (m_add(m, a, &c->values[i * c->ntypes], c->ntypes, w))
            return -ENOMEM;
    }
    if (w && w->dur > 0)
        m->dur_total += (double)w->dur;
    return 0;
}

static int parse_lset(struct store_merger *m, uint32_t id, size_t *n)
{
    size_t len;
    const uint8_t *p = ktab_key(&m->lsets, id, &len), *end = p + len;
    *n = 0;
    while (p < end) {
        if (VEC_RESERVE(m->labels, m->cap_labels, *n + 1))
            return -ENOMEM;
        pfr_label *l = &m->labels[(*n)++];
        l->key = (const char *)p;
        p += strlen((const char *)p) + 1;
        uint8_t kind = *p++;
        if (kind == 's') {
            l->str = (const char *)p;
            l->num = 0;
            l->unit = NULL;
            p += strlen((const char *)p) + 1;
        } else {
            l->str = NULL;
            memcpy(&l->num, p, sizeof(l->num));
            p += sizeof(l->num);
            l->unit = *p ? (const char *)p : NULL;
            p += strlen((const char *)p) + 1;
        }
    }
    return 0;
}

int pfr_st_merger_finish(struct store_merger *m)
{
    if (m->gauge && m->dur_total > 0 && m_gacc_grow(m, m->nacc))
        return -ENOMEM;
    for (size_t i = 0; m->gauge && m->dur_total > 0 && i < m->nacc; i++)
        for (size_t o = 0; o < m->nout; o++)
            if (m->gauge[o])
                m->vals[i * m->nout + o] = llround(m->gacc[i * m->nout + o] / m->dur_total);
    for (size_t i = 0; i < m->nacc; i++) {
        uint32_t sid = (uint32_t)(m->keys[i] >> 32), lid = (uint32_t)m->keys[i];
        size_t len, nl;
        const uint32_t *locs = (const uint32_t *)ktab_key(&m->stacks, sid, &len);
        int rc = parse_lset(m, lid, &nl);
        if (rc)
            return rc;
        int64_t x =
            pfr_profile_add_sample(m->p, locs, len / 4, &m->vals[i * m->nout], m->labels, nl);
        if (x < 0)
            return (int)x;
    }
    return pfr_profile_error(m->p);
}

bool pfr_st_type_is_gauge(const char *type)
{
    /* Coroot's "avg" types: go:heap_inuse_*, go_runtime:heap_inuse_*, go:goroutine_*. The same
     * test as the query tool's (pfr_query_type_is_gauge). */
    return type && (strstr(type, "inuse") || strstr(type, "goroutine"));
}

int pfr_st_merger_gauges(struct store_merger *m)
{
    free(m->gauge);
    m->gauge = NULL;
    bool any = false;
    for (size_t o = 0; o < m->nout; o++)
        any = any || pfr_st_type_is_gauge(pfr_profile_sample_type(m->p, o, NULL));
    if (!any)
        return 0;
    if (!(m->gauge = calloc(m->nout, 1)))
        return -ENOMEM;
    for (size_t o = 0; o < m->nout; o++)
        m->gauge[o] = pfr_st_type_is_gauge(pfr_profile_sample_type(m->p, o, NULL));
    return 0;
}
