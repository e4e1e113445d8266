/* Merging profiles: remap src's tables into dst. Records keep content hashes that do not depend
 * on indices, so nothing is rehashed here: each item costs one probe and a compare. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_profile_internal.h"

static bool same_str(const pfr_profile *a, uint32_t ia, const pfr_profile *b, uint32_t ib)
{
    const struct pfr_string_rec *x = &a->strs[ia], *y = &b->strs[ib];
    return x->hash == y->hash && x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* dst takes src's sample types when it has none; otherwise they must be equal. */
static int merge_types(pfr_profile *dst, const pfr_profile *src)
{
    if (dst->ntypes == 0 && dst->nsamples == 0) {
        for (size_t i = 0; i < src->ntypes; i++) {
            int r = pfr_profile_add_sample_type(dst, src->strs[src->types[i].type].s,
                                                src->strs[src->types[i].unit].s);
            if (r < 0)
                return r;
        }
        return 0;
    }
    if (dst->ntypes != src->ntypes)
        return -EINVAL;
    for (size_t i = 0; i < src->ntypes; i++)
        if (!same_str(dst, dst->types[i].type, src, src->types[i].type) ||
            !same_str(dst, dst->types[i].unit, src, src->types[i].unit))
            return -EINVAL;
    return 0;
}

static int64_t end_of(int64_t start, int64_t dur)
{
    int64_t e;
    if (__builtin_add_overflow(start, dur, &e))
        return dur > 0 ? INT64_MAX : INT64_MIN;
    return e;
}

static void merge_header(pfr_profile *dst, const pfr_profile *src)
{
    if (!dst->period && !dst->period_type.type && !dst->period_type.unit &&
        (src->period || src->period_type.type || src->period_type.unit))
        pfr_profile_set_period(dst, src->strs[src->period_type.type].s,
                               src->strs[src->period_type.unit].s, src->period);
    if (!src->time_nanos && !src->duration_nanos)
        return;
    if (!dst->time_nanos && !dst->duration_nanos) {
        dst->time_nanos = src->time_nanos;
        dst->duration_nanos = src->duration_nanos;
        return;
    }
    int64_t start = dst->time_nanos < src->time_nanos ? dst->time_nanos : src->time_nanos;
    int64_t e1 = end_of(dst->time_nanos, dst->duration_nanos);
    int64_t e2 = end_of(src->time_nanos, src->duration_nanos);
    int64_t end = e1 > e2 ? e1 : e2;
    int64_t dur;
    if (__builtin_sub_overflow(end, start, &dur))
        dur = INT64_MAX;
    dst->time_nanos = start;
    dst->duration_nanos = dur;
}

struct remap {
    uint32_t *str, *map, *fn, *loc;
    pfr_line *lines;
    size_t cap_lines;
    uint32_t *stack;
    size_t cap_stack;
    struct pfr_label_rec *labels;
    size_t cap_labels;
};

static int merge_tables(pfr_profile *dst, const pfr_profile *src, struct remap *r)
{
    for (size_t i = 0; i < src->nstrs; i++) {
        const struct pfr_string_rec *s = &src->strs[i];
        int64_t x = pfr_intern_hashed(dst, s->s, s->len, s->hash);
        if (x < 0)
            return (int)x;
        r->str[i] = (uint32_t)x;
    }
    for (size_t i = 0; i < src->nmaps; i++) {
        struct pfr_mapping_rec m = src->maps[i];
        m.file = r->str[m.file];
        m.build_id = r->str[m.build_id];
        int64_t x = pfr_mapping_put(dst, &m);
        if (x < 0)
            return (int)x;
        r->map[i] = (uint32_t)x;
    }
    for (size_t i = 0; i < src->nfuncs; i++) {
        struct pfr_function_rec f = src->funcs[i];
        f.name = r->str[f.name];
        f.system_name = r->str[f.system_name];
        f.file = r->str[f.file];
        int64_t x = pfr_function_put(dst, &f);
        if (x < 0)
            return (int)x;
        r->fn[i] = (uint32_t)x;
    }
    for (size_t i = 0; i < src->nlocs; i++) {
        const struct pfr_location_rec *l = &src->locs[i];
        if (PFR_RESERVE(r->lines, r->cap_lines, l->nlines))
            return -ENOMEM;
        for (uint32_t j = 0; j < l->nlines; j++) {
            r->lines[j].function = r->fn[src->lines[l->line_off + j].function];
            r->lines[j].line = src->lines[l->line_off + j].line;
        }
        uint32_t m1 = l->mapping ? r->map[l->mapping - 1] + 1 : 0;
        int64_t x = pfr_location_put(dst, m1, l->address, r->lines, l->nlines, l->hash);
        if (x < 0)
            return (int)x;
        r->loc[i] = (uint32_t)x;
    }
    return 0;
}

static int merge_samples(pfr_profile *dst, const pfr_profile *src, struct remap *r, unsigned flags)
{
    bool drop = flags & PFR_MERGE_DROP_LABELS;
    uint64_t no_labels = pfr_labels_hash(dst, NULL, 0);
    for (size_t i = 0; i < src->nsamples; i++) {
        const struct pfr_sample_rec *s = &src->samples[i];
        if (PFR_RESERVE(r->stack, r->cap_stack, s->nlocs))
            return -ENOMEM;
        for (uint32_t j = 0; j < s->nlocs; j++)
            r->stack[j] = r->loc[src->stack[s->loc_off + j]];
        uint32_t nlab = drop ? 0 : s->nlabels;
        uint64_t lh = no_labels;
        if (nlab) {
            if (PFR_RESERVE(r->labels, r->cap_labels, nlab))
                return -ENOMEM;
            const struct pfr_label_rec *sl = src->labels + s->label_off;
            for (uint32_t j = 0; j < nlab; j++) {
                r->labels[j] = sl[j];
                r->labels[j].key = r->str[sl[j].key];
                r->labels[j].unit = r->str[sl[j].unit];
                if (sl[j].str != PFR_LABEL_NUM)
                    r->labels[j].str = r->str[sl[j].str];
            }
            lh = pfr_labels_hash(src, sl, nlab);
        }
        int64_t x =
            pfr_sample_put(dst, r->stack, s->nlocs, s->stack_hash,
                           src->ntypes ? src->values + i * src->ntypes : NULL, r->labels, nlab, lh);
        if (x < 0)
            return (int)x;
    }
    return 0;
}

int pfr_profile_merge(pfr_profile *dst, const pfr_profile *src, unsigned flags)
{
    if (dst->err)
        return dst->err;
    if (src->err || dst == src)
        return -EINVAL;
    int rc = merge_types(dst, src);
    if (rc)
        return rc == -ENOMEM ? pfr_fail(dst, rc) : rc;
    merge_header(dst, src);

    if (dst->nsamples == 0) { /* the first merge into an empty profile: size it once */
        struct pfr_sizes z = {src->nstrs,    src->nmaps,  src->nfuncs,  src->nlocs, src->nlines,
                              src->nsamples, src->nstack, src->nlabels, 0};
        if (pfr_profile_reserve(dst, &z))
            return dst->err;
    }
    struct remap r = {0};
    size_t n = src->nstrs + src->nmaps + src->nfuncs + src->nlocs;
    uint32_t *all = malloc((n ? n : 1) * sizeof(*all));
    if (!all)
        return pfr_fail(dst, -ENOMEM);
    r.str = all;
    r.map = r.str + src->nstrs;
    r.fn = r.map + src->nmaps;
    r.loc = r.fn + src->nfuncs;
    rc = merge_tables(dst, src, &r);
    if (!rc)
        rc = merge_samples(dst, src, &r, flags);
    free(all);
    free(r.lines);
    free(r.stack);
    free(r.labels);
    if (rc)
        return pfr_fail(dst, rc);
    return dst->err;
}
