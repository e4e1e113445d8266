/*
 * Profiles from decoded chunks (store_build.h): the profile a scan hands out and the samples view
 * of pfr_store_scan_samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_build.h"

/* ---- sample label filters ---- */
const char *pfr_st_str_at(const struct tabs *d, const struct tabs *delta, uint32_t i)
{
    size_t len;
    return (const char *)tabs2_key(d, delta, T_STR, i, &len);
}

bool pfr_st_lset_matches(const struct tabs *d, const struct tabs *delta, uint32_t ls,
                         const pfr_store_filter *f)
{
    size_t len;
    const struct nlabel *l = (const struct nlabel *)tabs2_key(d, delta, T_LSET, ls, &len);
    size_t n = len / sizeof(*l);
    for (size_t i = 0; i < f->nsample_labels; i++) {
        bool ok = false;
        for (size_t j = 0; j < n && !ok; j++) {
            if (strcmp(pfr_st_str_at(d, delta, l[j].key), f->sample_labels[i].key) != 0)
                continue;
            if (l[j].str != LABEL_NUM) {
                ok = strcmp(pfr_st_str_at(d, delta, l[j].str), f->sample_labels[i].value) == 0;
            } else {
                char num[32];
                snprintf(num, sizeof(num), "%" PRId64, l[j].num);
                ok = strcmp(num, f->sample_labels[i].value) == 0;
            }
        }
        if (!ok)
            return false;
    }
    return true;
}

/* ---- a chunk as a pfr_profile ---- */
/* The profile's function for chunk-space function fn, added on its first use in this build: a
 * function is on the lines of several locations, and each add interns its name and file again. */
static int64_t add_func(pfr_profile *p, const struct tabs *d, const struct tabs *delta, uint32_t fn,
                        struct build_scratch *b)
{
    if (b->funcmap[fn])
        return b->funcmap[fn] - 1;
    size_t len;
    const struct nfunc *f = (const struct nfunc *)tabs2_key(d, delta, T_FUNC, fn, &len);
    const char *name = pfr_st_str_at(d, delta, f->name);
    int64_t fi = pfr_profile_add_function(p, name, name, pfr_st_str_at(d, delta, f->file), 0);
    if (fi >= 0)
        b->funcmap[fn] = (uint32_t)fi + 1;
    return fi;
}

/* *last_module / *last_map: the module string of the previous location and its mapping (most
 * locations of a chunk share a few modules: one look-up per change, not per location). */
static int64_t add_loc(pfr_profile *p, const struct tabs *d, const struct tabs *delta, uint32_t loc,
                       struct build_scratch *b, uint32_t *last_module, int64_t *last_map)
{
    size_t len;
    const struct nloc *l = (const struct nloc *)tabs2_key(d, delta, T_LOC, loc, &len);
    const struct nline *ln = (const struct nline *)(l + 1);
    if (VEC_RESERVE(b->lines, b->cap_lines, l->nlines ? l->nlines : 1))
        return -ENOMEM;
    for (uint32_t i = 0; i < l->nlines; i++) {
        int64_t fi = add_func(p, d, delta, ln[i].func, b);
        if (fi < 0)
            return fi;
        b->lines[i] = (pfr_line){(uint32_t)fi, ln[i].line};
    }
    if (l->module != *last_module) {
        const char *module = pfr_st_str_at(d, delta, l->module);
        int64_t m = -1;
        if (module[0] && (m = pfr_profile_add_mapping(p, 0, 0, 0, module, "")) < 0)
            return m;
        *last_module = l->module;
        *last_map = m;
    }
    return pfr_profile_add_location(p, *last_map, l->addr, b->lines, l->nlines);
}

static void set_header(pfr_profile *p, const struct tabs *d, const struct dchunk *c)
{
    const char *pt = pfr_st_str_at(d, &c->delta, c->period_type);
    const char *pu = pfr_st_str_at(d, &c->delta, c->period_unit);
    if (c->period || pt[0] || pu[0])
        pfr_profile_set_period(p, pt, pu, c->period);
    if (c->time_nanos || c->duration)
        pfr_profile_set_time(p, c->time_nanos, c->duration);
}

void pfr_st_build_scratch_free(struct build_scratch *b)
{
    free(b->locmap);
    free(b->funcmap);
    free(b->lsok);
    free(b->stack);
    free(b->lines);
    free(b->labels);
}

/* pfr_label array of label set ls (pointers into the tables). */
static int lset_labels(const struct tabs *d, const struct tabs *delta, uint32_t ls, pfr_label **out,
                       size_t *cap, size_t *n)
{
    size_t len;
    const struct nlabel *l = (const struct nlabel *)tabs2_key(d, delta, T_LSET, ls, &len);
    *n = len / sizeof(*l);
    if (VEC_RESERVE(*out, *cap, *n ? *n : 1))
        return -ENOMEM;
    for (size_t j = 0; j < *n; j++) {
        pfr_label *o = &(*out)[j];
        o->key = pfr_st_str_at(d, delta, l[j].key);
        if (l[j].str == LABEL_NUM) {
            o->str = NULL;
            o->num = l[j].num;
            o->unit = l[j].unit ? pfr_st_str_at(d, delta, l[j].unit) : NULL;
        } else {
            o->str = pfr_st_str_at(d, delta, l[j].str);
            o->num = 0;
            o->unit = NULL;
        }
    }
    return 0;
}

int pfr_st_build_profile(const struct rstream *r, const struct tabs *d, const struct dchunk *c,
                         const pfr_store_filter *f, struct build_scratch *b, pfr_profile **out)
{
    *out = NULL;
    pfr_profile *p = pfr_profile_new();
    if (!p)
        return -ENOMEM;
    for (size_t i = 0; i < r->ntypes; i++)
        pfr_profile_add_sample_type(p, r->types[i], r->units[i]);
    set_header(p, d, c);
    size_t nloc = (size_t)c->base[T_LOC] + c->delta.t[T_LOC].n;
    size_t nls = (size_t)c->base[T_LSET] + c->delta.t[T_LSET].n;
    size_t nfunc = (size_t)c->base[T_FUNC] + c->delta.t[T_FUNC].n;
    if (VEC_RESERVE(b->locmap, b->cap_loc, nloc ? nloc : 1) ||
        VEC_RESERVE(b->funcmap, b->cap_func, nfunc ? nfunc : 1) ||
        VEC_RESERVE(b->lsok, b->cap_ls, nls ? nls : 1)) {
        pfr_profile_free(p);
        return -ENOMEM;
    }
    memset(b->locmap, 0, nloc * sizeof(*b->locmap));
    memset(b->funcmap, 0, nfunc * sizeof(*b->funcmap));
    memset(b->lsok, 0, nls);
    uint32_t last_module = UINT32_MAX;
    int64_t last_map = -1;
    bool filter = f && f->nsample_labels;
    int rc = 0;
    for (size_t i = 0; i < c->nsamples && !rc; i++) {
        uint32_t ls = c->lset[i];
        if (filter) {
            if (!b->lsok[ls])
                b->lsok[ls] = pfr_st_lset_matches(d, &c->delta, ls, f) ? 1 : 2;
            if (b->lsok[ls] == 2)
                continue;
        }
        size_t len;
        const uint32_t *locs =
            (const uint32_t *)tabs2_key(d, &c->delta, T_STACK, c->stack[i], &len);
        size_t n = len / 4;
        if (VEC_RESERVE(b->stack, b->cap_stack, n ? n : 1)) {
            rc = -ENOMEM;
            break;
        }
        for (size_t j = 0; j < n && !rc; j++) {
            if (!b->locmap[locs[j]]) {
                int64_t x = add_loc(p, d, &c->delta, locs[j], b, &last_module, &last_map);
                if (x < 0)
                    rc = (int)x;
                else
                    b->locmap[locs[j]] = (uint32_t)x + 1;
            }
            b->stack[j] = b->locmap[locs[j]] - 1;
        }
        size_t nl;
        if (!rc)
            rc = lset_labels(d, &c->delta, ls, &b->labels, &b->cap_labels, &nl);
        if (!rc) {
            int64_t x =
                pfr_profile_add_sample(p, b->stack, n, &c->values[i * c->ntypes], b->labels, nl);
            if (x < 0)
                rc = (int)x;
        }
    }
    if (!rc)
        rc = pfr_profile_error(p);
    if (rc) {
        pfr_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- a chunk's samples against its dictionary ---- */
struct pfr_chunk_samples {
    const struct tabs *d;   /* the stream's dictionary chain (may hold later layers too) */
    const struct dchunk *c; /* the chunk: its delta and samples */
    int64_t dict;           /* the chain's base layer id */
    const uint32_t *keep;   /* sample indices that pass the sample label filter */
    size_t n;
};

/* Entry i of table k: the dictionary below the chunk's base, the chunk's delta above. */
static const uint8_t *view_key(const pfr_chunk_samples *v, int k, uint32_t i, size_t *len)
{
    if (i < v->c->base[k])
        return ktab_key(&v->d->t[k], i, len);
    return ktab_key(&v->c->delta.t[k], i - v->c->base[k], len);
}

static const char *view_str(const pfr_chunk_samples *v, uint32_t i)
{
    size_t len;
    return (const char *)view_key(v, T_STR, i, &len);
}

static uint32_t view_count(const pfr_chunk_samples *v, int k)
{
    return v->c->base[k] + v->c->delta.t[k].n;
}

int64_t pfr_samples_dict(const pfr_chunk_samples *v, uint32_t *stable_stacks,
                         uint32_t *stable_locations)
{
    if (stable_stacks)
        *stable_stacks = v->c->base[T_STACK];
    if (stable_locations)
        *stable_locations = v->c->base[T_LOC];
    return v->dict;
}

size_t pfr_samples_count(const pfr_chunk_samples *v)
{
    return v->n;
}

uint32_t pfr_samples_num_stacks(const pfr_chunk_samples *v)
{
    return view_count(v, T_STACK);
}

uint32_t pfr_samples_stack(const pfr_chunk_samples *v, size_t i)
{
    return i < v->n ? v->c->stack[v->keep[i]] : UINT32_MAX;
}

uint32_t pfr_samples_label_set(const pfr_chunk_samples *v, size_t i)
{
    return i < v->n ? v->c->lset[v->keep[i]] : UINT32_MAX;
}

const int64_t *pfr_samples_values(const pfr_chunk_samples *v, size_t i)
{
    return i < v->n ? &v->c->values[(size_t)v->keep[i] * v->c->ntypes] : NULL;
}

const uint32_t *pfr_samples_stack_locations(const pfr_chunk_samples *v, uint32_t stack, size_t *n)
{
    *n = 0;
    if (stack >= view_count(v, T_STACK))
        return NULL;
    size_t len;
    const uint32_t *locs = (const uint32_t *)view_key(v, T_STACK, stack, &len);
    *n = len / sizeof(*locs);
    return locs;
}

size_t pfr_samples_location_frames(const pfr_chunk_samples *v, uint32_t loc, pfr_frame *out,
                                   size_t cap)
{
    if (loc >= view_count(v, T_LOC))
        return 0;
    size_t len;
    const struct nloc *l = (const struct nloc *)view_key(v, T_LOC, loc, &len);
    const struct nline *ln = (const struct nline *)(l + 1);
    const char *module = view_str(v, l->module);
    if (l->nlines == 0) {
        /* An unsymbolized location is still one frame (as in pfr_profile_location_frames). */
        if (cap > 0)
            out[0] = (pfr_frame){"", "", 0, l->addr, module};
        return 1;
    }
    for (uint32_t i = 0; i < l->nlines && i < cap; i++) {
        const struct nfunc *f = (const struct nfunc *)view_key(v, T_FUNC, ln[i].func, &len);
        out[i] =
            (pfr_frame){view_str(v, f->name), view_str(v, f->file), ln[i].line, l->addr, module};
    }
    return l->nlines;
}

size_t pfr_samples_stack_frames(const pfr_chunk_samples *v, uint32_t stack, pfr_frame *out,
                                size_t cap)
{
    size_t n, total = 0;
    const uint32_t *locs = pfr_samples_stack_locations(v, stack, &n);
    for (size_t j = 0; j < n; j++) {
        size_t room = total < cap ? cap - total : 0;
        total += pfr_samples_location_frames(v, locs[j], room ? out + total : NULL, room);
    }
    return total;
}

size_t pfr_samples_labels(const pfr_chunk_samples *v, uint32_t lset, pfr_label *out, size_t cap)
{
    if (lset >= view_count(v, T_LSET))
        return 0;
    size_t len;
    const struct nlabel *l = (const struct nlabel *)view_key(v, T_LSET, lset, &len);
    size_t n = len / sizeof(*l);
    for (size_t j = 0; j < n && j < cap; j++) {
        pfr_label *o = &out[j];
        o->key = view_str(v, l[j].key);
        if (l[j].str == LABEL_NUM) {
            o->str = NULL;
            o->num = l[j].num;
            o->unit = l[j].unit ? view_str(v, l[j].unit) : NULL;
        } else {
            o->str = view_str(v, l[j].str);
            o->num = 0;
            o->unit = NULL;
        }
    }
    return n;
}

/* The samples of c that pass f's sample label filter, as indices into b->stack (reused). */
static int view_init(pfr_chunk_samples *v, const struct tabs *d, int64_t dict,
                     const struct dchunk *c, const pfr_store_filter *f, struct build_scratch *b)
{
    *v = (pfr_chunk_samples){.d = d, .c = c, .dict = dict};
    size_t nls = view_count(v, T_LSET);
    if (VEC_RESERVE(b->stack, b->cap_stack, c->nsamples ? c->nsamples : 1) ||
        VEC_RESERVE(b->lsok, b->cap_ls, nls ? nls : 1))
        return -ENOMEM;
    memset(b->lsok, 0, nls);
    bool filter = f && f->nsample_labels;
    for (size_t i = 0; i < c->nsamples; i++) {
        uint32_t ls = c->lset[i];
        if (filter && !b->lsok[ls]) {
            struct tabs dv = *v->d; /* the dictionary as of the chunk's layer */
            for (int k = 0; k < T_N; k++)
                dv.t[k].n = c->base[k];
            b->lsok[ls] = pfr_st_lset_matches(&dv, &c->delta, ls, f) ? 1 : 2;
        }
        if (!filter || b->lsok[ls] == 1)
            b->stack[v->n++] = (uint32_t)i;
    }
    v->keep = b->stack;
    return 0;
}

int pfr_st_samples_call(const struct tabs *d, int64_t dict, const struct dchunk *c,
                        const pfr_store_filter *f, struct build_scratch *b, const pfr_chunk_meta *m,
                        pfr_samples_cb cb, void *ctx)
{
    pfr_chunk_samples v;
    int rc = view_init(&v, d, dict, c, f, b);
    return rc ? rc : cb(m, &v, ctx);
}

/* ---- scan ---- */

/* Hand one loaded chunk to the reader: as a profile (pcb) or as samples (scb). */
