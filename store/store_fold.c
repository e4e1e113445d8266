/*
 * The fold (store_fold.h): the call tree of a merged profile, the threshold that keeps it within
 * the bound, and the folded profile. Why: docs/store.md, "Tiers".
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_buf.h"
#include "store_fold.h"
#include "store_util.h"

#define NONE UINT32_MAX

/* The call tree from the root: node = (caller node, location); samples hang off their leaf. */
struct ftree {
    const pfr_profile *p;
    size_t nt, ns;
    uint32_t *parent, *loc; /* per node */
    double *w;              /* per node: weight (largest share over the types) */
    double *sum;            /* per node and type: Σ|v| of the samples through it */
    size_t nnodes, cap_parent, cap_loc, cap_sum;
    uint32_t *leaf; /* per sample: its stack's node (NONE for an empty stack) */
    uint32_t *lset; /* per sample: its label set's index */
    pfr_map idx;    /* (parent + 1) << 32 | location -> node */
    struct ktab lsets;
    uint64_t *keys; /* scratch: one output key per sample */
};

static void ftree_free(struct ftree *t)
{
    free(t->parent);
    free(t->loc);
    free(t->w);
    free(t->sum);
    free(t->leaf);
    free(t->lset);
    free(t->keys);
    pfr_map_free(&t->idx);
    pfr_st_ktab_free(&t->lsets);
}

/* The node (parent, loc), added if new. NONE on error (*rc set). */
static uint32_t node_of(struct ftree *t, uint32_t parent, uint32_t loc, int *rc)
{
    if (t->nnodes >= INT32_MAX) {
        *rc = -EOVERFLOW;
        return NONE;
    }
    bool found;
    uint64_t key = (uint64_t)(parent == NONE ? 0 : parent + 1) << 32 | loc;
    uint32_t n = store_map_put(&t->idx, key, (uint32_t)t->nnodes, &found);
    if (n == UINT32_MAX) {
        *rc = -ENOMEM;
        return NONE;
    }
    if (found)
        return n;
    if (VEC_RESERVE(t->parent, t->cap_parent, t->nnodes + 1) ||
        VEC_RESERVE(t->loc, t->cap_loc, t->nnodes + 1) ||
        VEC_RESERVE(t->sum, t->cap_sum, (t->nnodes + 1) * t->nt)) {
        *rc = -ENOMEM;
        return NONE;
    }
    t->parent[n] = parent;
    t->loc[n] = loc;
    memset(&t->sum[(size_t)n * t->nt], 0, t->nt * sizeof(*t->sum));
    t->nnodes++;
    return n;
}

/* Sample i's labels as bytes, interned: equal labels in equal order, equal index. */
static int lset_of(struct ftree *t, pfr_buf *b, size_t i, uint32_t *out)
{
    const pfr_label *l = NULL;
    size_t nl = pfr_profile_sample_labels(t->p, i, &l);
    b->len = 0;
    for (size_t k = 0; k < nl; k++) {
        pfr_buf_put(b, l[k].key, strlen(l[k].key) + 1);
        if (l[k].str) {
            pfr_buf_put(b, "s", 1);
            pfr_buf_put(b, l[k].str, strlen(l[k].str) + 1);
        } else {
            const char *unit = l[k].unit ? l[k].unit : "";
            pfr_buf_put(b, "n", 1);
            pfr_buf_put(b, &l[k].num, sizeof(l[k].num));
            pfr_buf_put(b, unit, strlen(unit) + 1);
        }
    }
    if (pfr_buf_err(b))
        return pfr_buf_err(b);
    int64_t x = pfr_st_ktab_intern(&t->lsets, b->data ? (const void *)b->data : "", b->len, NULL);
    if (x < 0)
        return (int)x;
    *out = (uint32_t)x;
    return 0;
}

/* Every sample's path from the root added to the tree, its absolute values summed along it; then
 * each node's weight. */
static int ftree_build(struct ftree *t)
{
    size_t ns = t->ns, nt = t->nt;
    double *tot = calloc(nt ? nt : 1, sizeof(*tot));
    pfr_buf b = {0};
    int rc = 0;
    t->leaf = malloc((ns ? ns : 1) * sizeof(*t->leaf));
    t->lset = malloc((ns ? ns : 1) * sizeof(*t->lset));
    t->keys = malloc((ns ? ns : 1) * sizeof(*t->keys));
    if (!tot || !t->leaf || !t->lset || !t->keys)
        rc = -ENOMEM;
    for (size_t i = 0; i < ns && !rc; i++) {
        size_t n = 0;
        const uint32_t *locs = pfr_profile_sample_locations(t->p, i, &n);
        const int64_t *v = pfr_profile_sample_values(t->p, i);
        uint32_t at = NONE;
        for (size_t j = n; j-- > 0 && !rc;) { /* locations are leaf first: walk from the root */
            if ((at = node_of(t, at, locs[j], &rc)) == NONE)
                break;
            for (size_t k = 0; k < nt; k++)
                t->sum[(size_t)at * nt + k] += fabs((double)v[k]);
        }
        t->leaf[i] = at;
        for (size_t k = 0; k < nt; k++)
            tot[k] += fabs((double)v[k]);
        if (!rc)
            rc = lset_of(t, &b, i, &t->lset[i]);
    }
    if (!rc && !(t->w = malloc((t->nnodes ? t->nnodes : 1) * sizeof(*t->w))))
        rc = -ENOMEM;
    for (size_t n = 0; n < t->nnodes && !rc; n++) {
        double w = 0;
        for (size_t k = 0; k < nt; k++)
            if (tot[k] > 0 && t->sum[n * nt + k] / tot[k] > w)
                w = t->sum[n * nt + k] / tot[k];
        t->w[n] = w;
    }
    free(tot);
    pfr_buf_free(&b);
    return rc;
}

/* The deepest node of sample i's stack kept at threshold theta (NONE: not even its root). A
 * child weighs no more than its caller, so the first kept node up from the leaf is that one. */
static uint32_t kept_end(const struct ftree *t, size_t i, double theta)
{
    uint32_t a = t->leaf[i];
    while (a != NONE && !(t->w[a] >= theta))
        a = t->parent[a];
    return a;
}

static int u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Distinct (stack, label set) entries the fold at theta leaves: a sample's output is its kept
 * end, whether it was folded below it, and its label set. */
static size_t entries_at(struct ftree *t, double theta)
{
    for (size_t i = 0; i < t->ns; i++) {
        uint32_t a = kept_end(t, i, theta);
        uint64_t node = a == NONE ? 0 : (uint64_t)a + 1;
        t->keys[i] = (node << 1 | (a != t->leaf[i])) << 32 | t->lset[i];
    }
    qsort(t->keys, t->ns, sizeof(*t->keys), u64_cmp);
    size_t n = 0;
    for (size_t i = 0; i < t->ns; i++)
        n += i == 0 || t->keys[i] != t->keys[i - 1];
    return n;
}

static int dbl_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a > b ? -1 : a < b;
}

/* The lowest threshold among the nodes' weights whose fold has at most max entries: INFINITY
 * when even the heaviest node alone leaves too many (every sample folds at the root). */
static int pick_theta(struct ftree *t, size_t max, double *theta)
{
    double *c = malloc((t->nnodes ? t->nnodes : 1) * sizeof(*c));
    if (!c)
        return -ENOMEM;
    memcpy(c, t->w, t->nnodes * sizeof(*c));
    qsort(c, t->nnodes, sizeof(*c), dbl_desc);
    size_t m = 0;
    for (size_t i = 0; i < t->nnodes; i++)
        if (m == 0 || c[i] != c[m - 1])
            c[m++] = c[i];
    /* entries_at(c[j]) grows with j (more nodes kept): the largest j within max */
    size_t lo = 0, hi = m; /* answer in [lo, hi): j < lo are within max (j = lo - 1 the best) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (entries_at(t, c[mid]) <= max)
            lo = mid + 1;
        else
            hi = mid;
    }
    *theta = lo ? c[lo - 1] : INFINITY;
    free(c);
    return 0;
}

/* ---- the folded profile ---- */

struct fout {
    pfr_profile *q;
    uint32_t *locmap; /* input location -> output location + 1 */
    pfr_frame *frames;
    size_t cap_frames;
    pfr_line *lines;
    size_t cap_lines;
    uint32_t *stack;
    size_t cap_stack;
    int64_t folded_loc;
};

/* Input location loc in the output, as the store keeps it: its lines' functions by name and
 * file, its mapping by module, its address (an unsymbolized location: no line). */
static int64_t loc_out(struct fout *o, const pfr_profile *p, uint32_t loc)
{
    if (o->locmap[loc])
        return (int64_t)o->locmap[loc] - 1;
    size_t nf = pfr_profile_location_frames(p, loc, o->frames, o->cap_frames);
    if (nf > o->cap_frames) {
        if (VEC_RESERVE(o->frames, o->cap_frames, nf))
            return -ENOMEM;
        nf = pfr_profile_location_frames(p, loc, o->frames, o->cap_frames);
    }
    if (VEC_RESERVE(o->lines, o->cap_lines, nf ? nf : 1))
        return -ENOMEM;
    const pfr_frame *f = o->frames;
    size_t nl = nf;
    if (nf == 1 && !f[0].function[0] && !f[0].file[0] && f[0].line == 0)
        nl = 0; /* pfr_profile_location_frames' one frame of a location without lines */
    for (size_t i = 0; i < nl; i++) {
        int64_t fn = pfr_profile_add_function(o->q, f[i].function, f[i].function, f[i].file, 0);
        if (fn < 0)
            return fn;
        o->lines[i] = (pfr_line){(uint32_t)fn, f[i].line};
    }
    int64_t map = -1;
    const char *module = nf ? f[0].module : "";
    uint64_t addr = nf ? f[0].address : 0;
    if (module[0] && (map = pfr_profile_add_mapping(o->q, 0, 0, 0, module, "")) < 0)
        return map;
    int64_t x = pfr_profile_add_location(o->q, map, addr, o->lines, nl);
    if (x >= 0)
        o->locmap[loc] = (uint32_t)x + 1;
    return x;
}

static int fout_header(struct fout *o, const pfr_profile *p)
{
    for (size_t k = 0; k < pfr_profile_num_sample_types(p); k++) {
        const char *unit = NULL;
        const char *type = pfr_profile_sample_type(p, k, &unit);
        pfr_profile_add_sample_type(o->q, type, unit);
    }
    const char *pt = NULL, *pu = NULL;
    int64_t period = pfr_profile_period(p, &pt, &pu);
    pfr_profile_set_period(o->q, pt, pu, period);
    pfr_profile_set_time(o->q, pfr_profile_time_nanos(p), pfr_profile_duration_nanos(p));
    int64_t fn = pfr_profile_add_function(o->q, STORE_FOLD_FRAME, STORE_FOLD_FRAME, "", 0);
    if (fn < 0)
        return (int)fn;
    pfr_line l = {(uint32_t)fn, 0};
    o->folded_loc = pfr_profile_add_location(o->q, -1, 0, &l, 1);
    return o->folded_loc < 0 ? (int)o->folded_loc : pfr_profile_error(o->q);
}

/* Sample i as its kept prefix (and a folded leaf when it left the kept tree) into the output. */
static int fout_sample(struct fout *o, const struct ftree *t, size_t i, double theta, double *moved,
                       double *kept)
{
    uint32_t a = kept_end(t, i, theta);
    bool folded = a != t->leaf[i];
    size_t n = 0, depth = 0;
    for (uint32_t x = a; x != NONE; x = t->parent[x])
        n++;
    pfr_profile_sample_locations(t->p, i, &depth);
    if (VEC_RESERVE(o->stack, o->cap_stack, n + 1))
        return -ENOMEM;
    size_t at = 0;
    if (folded)
        o->stack[at++] = (uint32_t)o->folded_loc;
    for (uint32_t x = a; x != NONE; x = t->parent[x]) {
        int64_t l = loc_out(o, t->p, t->loc[x]);
        if (l < 0)
            return (int)l;
        o->stack[at++] = (uint32_t)l;
    }
    const int64_t *v = pfr_profile_sample_values(t->p, i);
    if (folded)
        for (size_t k = 0; k < t->nt; k++)
            moved[k] += fabs((double)v[k]);
    if (t->nt)
        *kept += fabs((double)v[0]) * (depth ? (double)n / (double)depth : 1.0);
    const pfr_label *lab = NULL;
    size_t nl = pfr_profile_sample_labels(t->p, i, &lab);
    int64_t r = pfr_profile_add_sample(o->q, o->stack, at, v, lab, nl);
    return r < 0 ? (int)r : 0;
}

static int fold_out(const struct ftree *t, double theta, pfr_profile **out,
                    struct store_fold_stats *st)
{
    struct fout o = {.q = pfr_profile_new()};
    size_t nloc = pfr_profile_num_locations(t->p);
    o.locmap = calloc(nloc ? nloc : 1, sizeof(*o.locmap));
    double *moved = calloc(t->nt ? t->nt : 1, sizeof(*moved));
    double *tot = calloc(t->nt ? t->nt : 1, sizeof(*tot));
    int rc = !o.q || !o.locmap || !moved || !tot ? -ENOMEM : fout_header(&o, t->p);
    double kept = 0;
    for (size_t i = 0; i < t->ns && !rc; i++) {
        rc = fout_sample(&o, t, i, theta, moved, &kept);
        const int64_t *v = pfr_profile_sample_values(t->p, i);
        for (size_t k = 0; k < t->nt; k++)
            tot[k] += fabs((double)v[k]);
    }
    if (!rc)
        rc = pfr_profile_error(o.q);
    if (!rc) {
        st->out_entries = pfr_profile_num_samples(o.q);
        st->moved = 0;
        st->depth_kept = t->nt && tot[0] > 0 ? kept / tot[0] : 1.0;
        for (size_t k = 0; k < t->nt; k++)
            if (tot[k] > 0 && moved[k] / tot[k] > st->moved)
                st->moved = moved[k] / tot[k];
        *out = o.q;
        o.q = NULL;
    }
    pfr_profile_free(o.q);
    free(o.locmap);
    free(o.frames);
    free(o.lines);
    free(o.stack);
    free(moved);
    free(tot);
    return rc;
}

int pfr_st_fold(const pfr_profile *p, size_t max_entries, pfr_profile **out,
                struct store_fold_stats *st)
{
    struct store_fold_stats dummy;
    if (!st)
        st = &dummy;
    *out = NULL;
    size_t ns = pfr_profile_num_samples(p);
    *st = (struct store_fold_stats){.in_entries = ns, .out_entries = ns, .depth_kept = 1.0};
    if (!max_entries || ns <= max_entries)
        return 0;
    struct ftree t = {.p = p, .nt = pfr_profile_num_sample_types(p), .ns = ns};
    double theta = INFINITY;
    int rc = ftree_build(&t);
    if (!rc)
        rc = pick_theta(&t, max_entries, &theta);
    if (!rc) {
        for (size_t n = 0; n < t.nnodes; n++)
            st->kept_nodes += t.w[n] >= theta;
        rc = fold_out(&t, theta, out, st);
    }
    ftree_free(&t);
    return rc;
}
