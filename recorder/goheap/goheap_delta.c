#include "goheap_delta.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

void pfr_goheap_scale(uint64_t count, uint64_t bytes, int64_t rate, int64_t *out_count,
                      int64_t *out_bytes)
{
    if (count == 0 || bytes == 0) {
        *out_count = *out_bytes = 0;
        return;
    }
    if (count > INT64_MAX)
        count = INT64_MAX;
    if (bytes > INT64_MAX)
        bytes = INT64_MAX;
    if (rate <= 1) {
        *out_count = (int64_t)count;
        *out_bytes = (int64_t)bytes;
        return;
    }
    double avg = (double)bytes / (double)count;
    double scale = 1.0 / (1.0 - exp(-avg / (double)rate));
    double c = (double)count * scale, b = (double)bytes * scale;
    /* garbage counters must not overflow the conversion (undefined in C) */
    *out_count = c >= 9.2e18 ? INT64_MAX : (int64_t)c;
    *out_bytes = b >= 9.2e18 ? INT64_MAX : (int64_t)b;
}

static const struct pfr_goheap_prev *lookup(const pfr_goheap_delta *d, uint64_t addr)
{
    if (!d->index_cap)
        return NULL;
    size_t j = pfr_mix64_fast(addr) & (d->index_cap - 1);
    while (d->index[j]) {
        const struct pfr_goheap_prev *p = &d->prev[d->index[j] - 1];
        if (p->addr == addr)
            return p;
        j = (j + 1) & (d->index_cap - 1);
    }
    return NULL;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int pfr_goheap_delta_update(pfr_goheap_delta *d, const pfr_goheap_walk *w, int64_t rate,
                            bool from_zero, pfr_goheap_values *vals, pfr_goheap_totals *totals)
{
    size_t n = w->nbuckets;
    size_t icap = 64;
    while (icap < n * 2)
        icap *= 2;
    struct pfr_goheap_prev *np = n ? malloc(n * sizeof(*np)) : NULL;
    uint32_t *ni = calloc(icap, sizeof(*ni));
    if ((n && !np) || !ni || n >= UINT32_MAX) {
        free(np);
        free(ni);
        return -ENOMEM;
    }
    memset(totals, 0, sizeof(*totals));
    for (size_t i = 0; i < n; i++) {
        const pfr_goheap_bucket *b = &w->buckets[i];
        const struct pfr_goheap_prev *p = d->primed ? lookup(d, b->addr) : NULL;
        uint64_t dc, db;
        if (p && p->hash == b->hash && p->size == b->size && p->nstk == b->nstk &&
            b->allocs >= p->allocs && b->alloc_bytes >= p->alloc_bytes) {
            dc = b->allocs - p->allocs;
            db = b->alloc_bytes - p->alloc_bytes;
        } else if (d->primed || from_zero) {
            dc = b->allocs;
            db = b->alloc_bytes;
            if (p)
                totals->reset_buckets++;
            else
                totals->new_buckets++;
        } else {
            dc = db = 0; /* baseline: what happened before we looked is not this interval's */
        }
        pfr_goheap_values *v = &vals[i];
        pfr_goheap_scale(dc, db, rate, &v->alloc_objects, &v->alloc_bytes);
        /* frees may run ahead of allocs in a torn read; in use is never negative */
        uint64_t io = b->allocs > b->frees ? b->allocs - b->frees : 0;
        uint64_t ib = b->alloc_bytes > b->free_bytes ? b->alloc_bytes - b->free_bytes : 0;
        pfr_goheap_scale(io, ib, rate, &v->inuse_objects, &v->inuse_bytes);
        int64_t co, cb;
        pfr_goheap_scale(b->allocs, b->alloc_bytes, rate, &co, &cb);
        totals->alloc_objects = sat_add(totals->alloc_objects, co);
        totals->alloc_bytes = sat_add(totals->alloc_bytes, cb);
        totals->inuse_objects = sat_add(totals->inuse_objects, v->inuse_objects);
        totals->inuse_bytes = sat_add(totals->inuse_bytes, v->inuse_bytes);
        totals->delta_objects = sat_add(totals->delta_objects, v->alloc_objects);
        totals->delta_bytes = sat_add(totals->delta_bytes, v->alloc_bytes);

        np[i] =
            (struct pfr_goheap_prev){b->addr, b->hash, b->size, b->nstk, b->allocs, b->alloc_bytes};
        size_t j = pfr_mix64_fast(b->addr) & (icap - 1);
        while (ni[j])
            j = (j + 1) & (icap - 1);
        ni[j] = (uint32_t)(i + 1);
    }
    free(d->prev);
    free(d->index);
    d->prev = np;
    d->nprev = d->cap_prev = n;
    d->index = ni;
    d->index_cap = icap;
    d->primed = true;
    return 0;
}

void pfr_goheap_delta_reset(pfr_goheap_delta *d)
{
    pfr_goheap_delta_free(d);
}

void pfr_goheap_delta_free(pfr_goheap_delta *d)
{
    free(d->prev);
    free(d->index);
    memset(d, 0, sizeof(*d));
}
