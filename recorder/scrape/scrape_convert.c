/* Go pprof -> pfr profile: Coroot type names, stack aggregation and deltas of cumulative series
 * (see scrape_convert.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scrape_convert.h"
#include "scrape_internal.h"

struct sc_type {
    const char *src_type, *src_unit; /* as Go's runtime/pprof writes them */
    const char *name;                /* what pfr writes */
    bool cumulative;
};

#define MAX_TYPES 4

static const struct sc_type cpu_types[] = {
    {"cpu", "nanoseconds", PFR_SCRAPE_TYPE_CPU, false},
};
static const struct sc_type heap_types[] = {
    {"alloc_objects", "count", PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS, true},
    {"alloc_space", "bytes", PFR_SCRAPE_TYPE_HEAP_ALLOC_SPACE, true},
    {"inuse_objects", "count", PFR_SCRAPE_TYPE_HEAP_INUSE_OBJECTS, false},
    {"inuse_space", "bytes", PFR_SCRAPE_TYPE_HEAP_INUSE_SPACE, false},
};
static const struct sc_type goroutine_types[] = {
    {"goroutine", "count", PFR_SCRAPE_TYPE_GOROUTINES, false},
};
static const struct sc_type block_types[] = {
    {"contentions", "count", PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS, true},
    {"delay", "nanoseconds", PFR_SCRAPE_TYPE_BLOCK_DELAY, true},
};
static const struct sc_type mutex_types[] = {
    {"contentions", "count", PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS, true},
    {"delay", "nanoseconds", PFR_SCRAPE_TYPE_MUTEX_DELAY, true},
};

static const struct {
    const struct sc_type *t;
    size_t n;
    const char *names[MAX_TYPES];
} endpoint_types[PFR_SCRAPE_NUM_ENDPOINTS] = {
    [PFR_SCRAPE_CPU] = {cpu_types, 1, {PFR_SCRAPE_TYPE_CPU}},
    [PFR_SCRAPE_HEAP] = {heap_types,
                         4,
                         {PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS, PFR_SCRAPE_TYPE_HEAP_ALLOC_SPACE,
                          PFR_SCRAPE_TYPE_HEAP_INUSE_OBJECTS, PFR_SCRAPE_TYPE_HEAP_INUSE_SPACE}},
    [PFR_SCRAPE_GOROUTINE] = {goroutine_types, 1, {PFR_SCRAPE_TYPE_GOROUTINES}},
    [PFR_SCRAPE_BLOCK] = {block_types,
                          2,
                          {PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS, PFR_SCRAPE_TYPE_BLOCK_DELAY}},
    [PFR_SCRAPE_MUTEX] = {mutex_types,
                          2,
                          {PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS, PFR_SCRAPE_TYPE_MUTEX_DELAY}},
};

size_t pfr_scrape_convert_types(int ep, const char *const **names)
{
    if (ep < 0 || ep >= PFR_SCRAPE_NUM_ENDPOINTS) {
        *names = NULL;
        return 0;
    }
    *names = endpoint_types[ep].names;
    return endpoint_types[ep].n;
}

bool pfr_scrape_convert_cumulative(int ep)
{
    if (ep < 0 || ep >= PFR_SCRAPE_NUM_ENDPOINTS)
        return false;
    for (size_t i = 0; i < endpoint_types[ep].n; i++)
        if (endpoint_types[ep].t[i].cumulative)
            return true;
    return false;
}

void pfr_scrape_series_free(struct sc_series *s)
{
    free(s->hashes);
    free(s->values);
    memset(s, 0, sizeof(*s));
}

/* One distinct stack of the source: its hash, a sample that has it, summed values. */
struct agg {
    uint64_t hash;
    size_t sample;
    int64_t v[MAX_TYPES];
};

static int agg_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct agg *)a)->hash, y = ((const struct agg *)b)->hash;
    return x < y ? -1 : x > y;
}

/* Working state of one conversion. */
struct conv {
    const pfr_profile *src;
    pfr_frame *frames;
    size_t cap_frames;
    uint64_t *loc_hash; /* per source location; 0 = not computed yet */
    int64_t *loc_out;   /* per source location: index in the output, -1 = not added yet */
    pfr_line *lines;
    size_t cap_lines;
};

static int location_frames(struct conv *c, uint32_t loc, size_t *n)
{
    size_t total = pfr_profile_location_frames(c->src, loc, c->frames, c->cap_frames);
    if (total > c->cap_frames) {
        pfr_frame *nf = realloc(c->frames, total * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        c->frames = nf;
        c->cap_frames = total;
        total = pfr_profile_location_frames(c->src, loc, c->frames, c->cap_frames);
    }
    *n = total;
    return 0;
}

/* A location's hash over its frames' text (and the address of an unsymbolised one), so that
 * the same code has the same hash in every scrape of a program. */
static int location_hash(struct conv *c, uint32_t loc, uint64_t *out)
{
    if (c->loc_hash[loc]) {
        *out = c->loc_hash[loc];
        return 0;
    }
    size_t n;
    int rc = location_frames(c, loc, &n);
    if (rc)
        return rc;
    uint64_t h = PFR_HASH_FNV_OFFSET;
    for (size_t i = 0; i < n; i++) {
        const pfr_frame *f = &c->frames[i];
        h = pfr_hash_fnv1a(h, f->function, strlen(f->function) + 1);
        h = pfr_hash_fnv1a(h, f->file, strlen(f->file) + 1);
        h = pfr_hash_fnv1a(h, &f->line, sizeof(f->line));
        if (!*f->function && !*f->file)
            h = pfr_hash_fnv1a(h, &f->address, sizeof(f->address));
    }
    h = pfr_mix64(h);
    c->loc_hash[loc] = h ? h : 1;
    *out = c->loc_hash[loc];
    return 0;
}

static int output_location(struct conv *c, pfr_profile *dst, uint32_t loc, uint32_t *out)
{
    if (c->loc_out[loc] >= 0) {
        *out = (uint32_t)c->loc_out[loc];
        return 0;
    }
    size_t n;
    int rc = location_frames(c, loc, &n);
    if (rc)
        return rc;
    if (n > c->cap_lines) {
        pfr_line *nl = realloc(c->lines, n * sizeof(*nl));
        if (!nl)
            return -ENOMEM;
        c->lines = nl;
        c->cap_lines = n;
    }
    size_t nlines = 0;
    for (size_t i = 0; i < n; i++) {
        const pfr_frame *f = &c->frames[i];
        if (!*f->function && !*f->file)
            continue; /* an unsymbolised location: address only */
        int64_t fn = pfr_profile_add_function(dst, f->function, f->function, f->file, 0);
        if (fn < 0)
            return (int)fn;
        c->lines[nlines++] = (pfr_line){.function = (uint32_t)fn, .line = f->line};
    }
    int64_t l = pfr_profile_add_location(dst, -1, n ? c->frames[0].address : 0, c->lines, nlines);
    if (l < 0)
        return (int)l;
    c->loc_out[loc] = l;
    *out = (uint32_t)l;
    return 0;
}

/* Map each wanted type to its column in src. */
static int find_columns(int ep, const pfr_profile *src, int *col, char *err, size_t errlen)
{
    const struct sc_type *t = endpoint_types[ep].t;
    for (size_t i = 0; i < endpoint_types[ep].n; i++) {
        col[i] = -1;
        for (size_t j = 0; j < pfr_profile_num_sample_types(src); j++) {
            const char *unit = NULL;
            const char *type = pfr_profile_sample_type(src, j, &unit);
            if (type && unit && strcmp(type, t[i].src_type) == 0 &&
                strcmp(unit, t[i].src_unit) == 0) {
                col[i] = (int)j;
                break;
            }
        }
        if (col[i] < 0) {
            pfr_scrape_errf(err, errlen, "not a %s profile: no %s/%s sample type",
                            pfr_scrape_endpoint_name(ep), t[i].src_type, t[i].src_unit);
            return -EBADMSG;
        }
    }
    return 0;
}

/* Sum the source's samples by stack hash into *out (sorted by hash). */
static int aggregate(struct conv *c, int ep, const int *col, struct agg **out, size_t *nout,
                     char *err, size_t errlen)
{
    size_t ns = pfr_profile_num_samples(c->src), nt = endpoint_types[ep].n;
    struct agg *a = calloc(ns ? ns : 1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < ns; i++) {
        size_t nl;
        const uint32_t *locs = pfr_profile_sample_locations(c->src, i, &nl);
        uint64_t h = PFR_HASH_FNV_OFFSET;
        for (size_t j = 0; j < nl; j++) {
            uint64_t lh;
            int rc = location_hash(c, locs[j], &lh);
            if (rc) {
                free(a);
                return rc;
            }
            h = pfr_hash_fnv1a(h, &lh, sizeof(lh));
        }
        a[i].hash = pfr_mix64(h ^ nl);
        a[i].sample = i;
        const int64_t *v = pfr_profile_sample_values(c->src, i);
        for (size_t t = 0; t < nt; t++) {
            a[i].v[t] = v[col[t]];
            if (a[i].v[t] < 0) {
                pfr_scrape_errf(err, errlen, "negative value in a %s profile",
                                pfr_scrape_endpoint_name(ep));
                free(a);
                return -EBADMSG;
            }
        }
    }
    qsort(a, ns, sizeof(*a), agg_cmp);
    size_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        if (n > 0 && a[n - 1].hash == a[i].hash) {
            for (size_t t = 0; t < nt; t++) {
                if (__builtin_add_overflow(a[n - 1].v[t], a[i].v[t], &a[n - 1].v[t])) {
                    pfr_scrape_errf(err, errlen, "value overflow in a %s profile",
                                    pfr_scrape_endpoint_name(ep));
                    free(a);
                    return -EBADMSG;
                }
            }
            continue;
        }
        a[n++] = a[i];
    }
    *out = a;
    *nout = n;
    return 0;
}

/* Did the series go down since st? (A smaller value, or a stack that is gone.) */
static bool series_went_down(const struct sc_series *st, const struct agg *a, size_t n,
                             const unsigned *cum, unsigned ncum)
{
    size_t i = 0, j = 0, matched = 0;
    while (i < n && j < st->n) {
        if (a[i].hash < st->hashes[j]) {
            i++;
        } else if (a[i].hash > st->hashes[j]) {
            return true; /* an old stack is missing */
        } else {
            for (unsigned k = 0; k < ncum; k++)
                if (a[i].v[cum[k]] < st->values[j * ncum + k])
                    return true;
            matched++;
            i++;
            j++;
        }
    }
    return matched < st->n;
}

/* The previous value of stack hash for cumulative column k, or 0. */
static int64_t previous(const struct sc_series *st, size_t *cursor, uint64_t hash, unsigned k)
{
    while (*cursor < st->n && st->hashes[*cursor] < hash)
        (*cursor)++;
    if (*cursor < st->n && st->hashes[*cursor] == hash)
        return st->values[*cursor * st->ncum + k];
    return 0;
}

static int save_series(struct sc_series *st, const struct agg *a, size_t n, const unsigned *cum,
                       unsigned ncum)
{
    uint64_t *h = malloc((n ? n : 1) * sizeof(*h));
    int64_t *v = malloc((n ? n : 1) * (ncum ? ncum : 1) * sizeof(*v));
    if (!h || !v) {
        free(h);
        free(v);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        h[i] = a[i].hash;
        for (unsigned k = 0; k < ncum; k++)
            v[i * ncum + k] = a[i].v[cum[k]];
    }
    free(st->hashes);
    free(st->values);
    st->hashes = h;
    st->values = v;
    st->n = n;
    st->ncum = ncum;
    st->have = true;
    return 0;
}

static int build_output(struct conv *c, int ep, const struct agg *a, size_t n,
                        const struct sc_series *st, bool reset, int64_t start_ns, int64_t end_ns,
                        pfr_profile **out)
{
    const struct sc_type *t = endpoint_types[ep].t;
    size_t nt = endpoint_types[ep].n;
    pfr_profile *dst = pfr_profile_new();
    if (!dst)
        return -ENOMEM;
    for (size_t i = 0; i < nt; i++)
        pfr_profile_add_sample_type(dst, t[i].name, t[i].src_unit);
    const char *ptype, *punit;
    int64_t period = pfr_profile_period(c->src, &ptype, &punit);
    if (period > 0 && ptype && punit)
        pfr_profile_set_period(dst, ptype, punit, period);
    pfr_profile_set_time(dst, start_ns, end_ns - start_ns);

    uint32_t *locs = NULL;
    size_t cap_locs = 0, cursor = 0;
    int rc = pfr_profile_error(dst);
    for (size_t i = 0; i < n && !rc; i++) {
        int64_t v[MAX_TYPES];
        bool any = false;
        unsigned k = 0;
        for (size_t j = 0; j < nt; j++) {
            v[j] = a[i].v[j];
            if (t[j].cumulative) {
                if (!st->have)
                    v[j] = 0; /* baseline */
                else if (!reset)
                    v[j] -= previous(st, &cursor, a[i].hash, k);
                k++;
            }
            any |= v[j] != 0;
        }
        if (!any)
            continue;
        size_t nl;
        const uint32_t *sl = pfr_profile_sample_locations(c->src, a[i].sample, &nl);
        if (nl > cap_locs) {
            uint32_t *nlocs = realloc(locs, nl * sizeof(*nlocs));
            if (!nlocs) {
                rc = -ENOMEM;
                break;
            }
            locs = nlocs;
            cap_locs = nl;
        }
        for (size_t j = 0; j < nl && !rc; j++)
            rc = output_location(c, dst, sl[j], &locs[j]);
        if (!rc && pfr_profile_add_sample(dst, locs, nl, v, NULL, 0) < 0)
            rc = pfr_profile_error(dst);
    }
    free(locs);
    if (rc) {
        pfr_profile_free(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int pfr_scrape_convert(int ep, const pfr_profile *src, struct sc_series *st, int64_t start_ns,
                       int64_t end_ns, struct sc_convert_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    if (ep < 0 || ep >= PFR_SCRAPE_NUM_ENDPOINTS || end_ns <= start_ns)
        return -EINVAL;
    int col[MAX_TYPES];
    int rc = find_columns(ep, src, col, err, errlen);
    if (rc)
        return rc;
    size_t nlocs = pfr_profile_num_locations(src);
    struct conv c = {.src = src};
    c.loc_hash = calloc(nlocs ? nlocs : 1, sizeof(*c.loc_hash));
    c.loc_out = malloc((nlocs ? nlocs : 1) * sizeof(*c.loc_out));
    struct agg *a = NULL;
    size_t n = 0;
    if (!c.loc_hash || !c.loc_out) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nlocs; i++)
        c.loc_out[i] = -1;
    rc = aggregate(&c, ep, col, &a, &n, err, errlen);
    if (rc)
        goto out;
    res->stacks = n;

    unsigned cum[MAX_TYPES], ncum = 0;
    for (size_t i = 0; i < endpoint_types[ep].n; i++)
        if (endpoint_types[ep].t[i].cumulative)
            cum[ncum++] = (unsigned)i;
    bool reset = false;
    if (ncum && st->have && st->ncum == ncum)
        reset = series_went_down(st, a, n, cum, ncum);
    if (ncum && st->have && st->ncum != ncum)
        st->have = false; /* a different layout: start over */
    res->reset = reset;
    res->baseline = ncum && !st->have;

    /* An all-cumulative endpoint's first scrape is only a baseline. */
    if (!(res->baseline && ncum == endpoint_types[ep].n)) {
        rc = build_output(&c, ep, a, n, st, reset, start_ns, end_ns, &res->profile);
        if (rc)
            goto out;
        if (pfr_profile_num_samples(res->profile) == 0) {
            pfr_profile_free(res->profile);
            res->profile = NULL;
        }
    }
    if (ncum) {
        rc = save_series(st, a, n, cum, ncum);
        if (rc) {
            pfr_profile_free(res->profile);
            res->profile = NULL;
        }
    }
out:
    free(a);
    free(c.frames);
    free(c.loc_hash);
    free(c.loc_out);
    free(c.lines);
    return rc;
}
