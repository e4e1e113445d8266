#include "sinks/clickhouse/ch_columns.h"

#include "pfr_hash.h"
#include "pfr_vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* LowCardinality serialization (ClickHouse's Native format): a version word before the column,
 * then per column: flags (index width | has additional keys | dictionary update), the keys, the
 * row count and one index per row. */
#define LC_VERSION      1ull
#define LC_FLAGS        (1ull << 9 | 1ull << 10)
#define LC_INDEX_UINT8  0ull
#define LC_INDEX_UINT16 1ull
#define LC_INDEX_UINT32 2ull

static uint64_t str_hash(const char *s, size_t n)
{
    uint64_t h = pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, s, n);
    return h ^ h >> 29;
}

/* ---- LowCardinality dictionaries ---- */

static void lc_free(struct pfr_lcdict *d)
{
    pfr_buf_free(&d->arena);
    free(d->off);
    free(d->tab);
}

static void lc_reset(struct pfr_lcdict *d)
{
    pfr_buf_reset(&d->arena);
    d->n = 0;
    if (d->tab)
        memset(d->tab, 0, (d->mask + 1) * sizeof(*d->tab));
}

static const char *lc_key(const struct pfr_lcdict *d, uint32_t i)
{
    return (const char *)d->arena.data + d->off[i];
}

static int lc_rehash(struct pfr_lcdict *d, size_t cap)
{
    uint32_t *t = calloc(cap, sizeof(*t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < d->n; i++) {
        const char *k = lc_key(d, (uint32_t)i);
        size_t j = str_hash(k, strlen(k)) & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = (uint32_t)i + 1;
    }
    free(d->tab);
    d->tab = t;
    d->mask = cap - 1;
    return 0;
}

static int64_t lc_add(struct pfr_lcdict *d, const char *s, size_t n, size_t slot)
{
    if (pfr_vec_grow(&d->off, &d->cap, d->n + 1, sizeof(*d->off)) < 0 ||
        d->arena.len + n + 1 > UINT32_MAX)
        return -ENOMEM;
    d->off[d->n] = (uint32_t)d->arena.len;
    pfr_buf_put(&d->arena, s, n);
    pfr_buf_putc(&d->arena, 0);
    if (d->arena.oom)
        return -ENOMEM;
    d->tab[slot] = (uint32_t)++d->n;
    return (int64_t)d->n - 1;
}

/* The index of key s, added if new (the first key of a dictionary is always ""). */
static int64_t lc_intern(struct pfr_lcdict *d, const char *s)
{
    if (!d->tab || (d->n + 2) * 2 > d->mask + 1) {
        if (lc_rehash(d, d->tab ? (d->mask + 1) * 2 : 64) < 0)
            return -ENOMEM;
    }
    if (d->n == 0) {
        size_t j = str_hash("", 0) & d->mask;
        if (lc_add(d, "", 0, j) < 0)
            return -ENOMEM;
    }
    size_t n = strlen(s), j = str_hash(s, n) & d->mask;
    while (d->tab[j]) {
        uint32_t i = d->tab[j] - 1;
        if (!strcmp(lc_key(d, i), s))
            return i;
        j = (j + 1) & d->mask;
    }
    return lc_add(d, s, n, j);
}

/* ---- building ---- */

void pfr_ch_columns_free(pfr_ch_columns *c)
{
    lc_free(&c->svcs);
    lc_free(&c->types);
    lc_free(&c->labkeys);
    free(c->groups);
    free(c->labkey);
    free(c->labval);
    pfr_buf_free(&c->labvals);
    free(c->hashes);
    free(c->values);
    free(c->strows);
    pfr_buf_free(&c->stkstr);
    memset(c, 0, sizeof(*c));
}

void pfr_ch_columns_reset_samples(pfr_ch_columns *c)
{
    lc_reset(&c->types);
    lc_reset(&c->labkeys);
    pfr_buf_reset(&c->labvals);
    c->ngroups = c->nlabels = c->nrows = 0;
    c->est_samples = 0;
    if (!c->nstrows)
        pfr_ch_columns_reset(c);
}

void pfr_ch_columns_reset_stacks(pfr_ch_columns *c)
{
    pfr_buf_reset(&c->stkstr);
    c->nstrows = 0;
    c->est_stacks = 0;
    if (!c->nrows)
        pfr_ch_columns_reset(c);
}

void pfr_ch_columns_reset(pfr_ch_columns *c)
{
    lc_reset(&c->svcs);
    lc_reset(&c->types);
    lc_reset(&c->labkeys);
    pfr_buf_reset(&c->labvals);
    pfr_buf_reset(&c->stkstr);
    c->ngroups = c->nlabels = c->nrows = c->nstrows = 0;
    c->est_samples = c->est_stacks = 0;
    c->err = 0;
}

static void fail(pfr_ch_columns *c)
{
    c->err = -ENOMEM;
}

uint32_t pfr_ch_columns_labels(pfr_ch_columns *c, const pfr_kv *labels, size_t n)
{
    uint32_t first = (uint32_t)c->nlabels;
    if (pfr_vec_grow(&c->labkey, &c->cap_labkey, c->nlabels + n, sizeof(*c->labkey)) < 0 ||
        pfr_vec_grow(&c->labval, &c->cap_labval, c->nlabels + n, sizeof(*c->labval)) < 0) {
        fail(c);
        return first;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t k = lc_intern(&c->labkeys, labels[i].key);
        if (k < 0) {
            fail(c);
            return first;
        }
        c->labkey[c->nlabels] = (uint32_t)k;
        c->labval[c->nlabels++] = c->labvals.len;
        pfr_ch_string(&c->labvals, labels[i].value, strlen(labels[i].value));
    }
    if (c->labvals.oom)
        fail(c);
    return first;
}

/* Bytes of the labels lab .. lab + n - 1 in a row (Native: index byte and value). */
static size_t labels_bytes(const pfr_ch_columns *c, uint32_t lab, uint32_t n)
{
    if (!n)
        return 0;
    size_t end = (size_t)lab + n < c->nlabels ? c->labval[lab + n] : c->labvals.len;
    return n + end - c->labval[lab];
}

int pfr_ch_columns_group(pfr_ch_columns *c, const char *service, const char *type, int64_t start,
                         int64_t end, uint32_t lab, uint32_t nlab, size_t nrows, uint64_t **hashes,
                         int64_t **values)
{
    int64_t s = lc_intern(&c->svcs, service), t = lc_intern(&c->types, type);
    if (c->err || s < 0 || t < 0 ||
        pfr_vec_grow(&c->groups, &c->cap_groups, c->ngroups + 1, sizeof(*c->groups)) < 0 ||
        pfr_vec_grow(&c->hashes, &c->cap_hashes, c->nrows + nrows, sizeof(*c->hashes)) < 0 ||
        pfr_vec_grow(&c->values, &c->cap_values, c->nrows + nrows, sizeof(*c->values)) < 0) {
        fail(c);
        return -ENOMEM;
    }
    c->groups[c->ngroups++] = (struct pfr_sgroup){
        .svc = (uint32_t)s,
        .type = (uint32_t)t,
        .lab = lab,
        .nlab = nlab,
        .start = start,
        .end = end,
        .row = c->nrows,
        .nrows = nrows,
    };
    *hashes = c->hashes + c->nrows;
    *values = c->values + c->nrows;
    c->nrows += nrows;
    /* two indices, Start, End, the map's offset, StackHash, Value, the labels */
    c->est_samples += nrows * (2 + 16 + 8 + 16 + labels_bytes(c, lab, nlab));
    return 0;
}

int pfr_ch_columns_stack(pfr_ch_columns *c, const char *service, uint64_t hash, int64_t last_seen)
{
    int64_t s = lc_intern(&c->svcs, service);
    if (c->err || s < 0 ||
        pfr_vec_grow(&c->strows, &c->cap_strows, c->nstrows + 1, sizeof(*c->strows)) < 0) {
        fail(c);
        return -ENOMEM;
    }
    c->strows[c->nstrows++] = (struct pfr_strow){
        .svc = (uint32_t)s, .hash = hash, .last_seen = last_seen, .str = c->stkstr.len};
    c->est_stacks += 1 + 8 + 8 + 8;
    return 0;
}

void pfr_ch_columns_stack_str(pfr_ch_columns *c, const char *s, size_t n)
{
    struct pfr_strow *r = &c->strows[c->nstrows - 1];
    size_t before = c->stkstr.len;
    pfr_ch_string(&c->stkstr, s, n);
    r->nstr++;
    r->str_len += c->stkstr.len - before;
    c->est_stacks += c->stkstr.len - before;
    if (c->stkstr.oom)
        fail(c);
}

void pfr_ch_columns_stack_enc(pfr_ch_columns *c, const void *enc, size_t len, size_t n)
{
    struct pfr_strow *r = &c->strows[c->nstrows - 1];
    pfr_buf_put(&c->stkstr, enc, len);
    r->nstr += (uint32_t)n;
    r->str_len += len;
    c->est_stacks += len;
    if (c->stkstr.oom)
        fail(c);
}

size_t pfr_ch_columns_sample_rows(const pfr_ch_columns *c)
{
    return c->nrows;
}

size_t pfr_ch_columns_stack_rows(const pfr_ch_columns *c)
{
    return c->nstrows;
}

const char *pfr_ch_columns_service(const pfr_ch_columns *c, uint32_t i)
{
    return lc_key(&c->svcs, i);
}

/* ---- rendering ---- */

static void put_lcstr(pfr_buf *b, const struct pfr_lcdict *d, uint32_t i)
{
    const char *k = lc_key(d, i);
    pfr_ch_string(b, k, strlen(k));
}

static unsigned lc_width(const struct pfr_lcdict *d)
{
    return d->n <= 256 ? 1 : d->n <= 65536 ? 2 : 4;
}

static void put_index(pfr_buf *b, unsigned width, uint32_t i)
{
    uint8_t v[4] = {(uint8_t)i, (uint8_t)(i >> 8), (uint8_t)(i >> 16), (uint8_t)(i >> 24)};
    pfr_buf_put(b, v, width);
}

/* ---- the tables' sort order ----
 * ClickHouse sorts every inserted block by the table's ORDER BY before it writes the part, and
 * skips the sort (and the copy of every column through the permutation) when the block is sorted
 * already. So the bodies go in that order: sample groups by (ServiceName, Type,
 * toUnixTimestamp(Start), toUnixTimestamp(End)), stack rows by (ServiceName, Hash), ties in the
 * order they were added (ClickHouse's sort is stable too: the part is the same either way). */

/* The rank of each key of a dictionary in byte order (strcmp compares as unsigned char, like
 * ClickHouse's String comparison; keys have no NUL inside). */
static int rank_cmp(const void *a, const void *b, void *d)
{
    return strcmp(lc_key(d, *(const uint32_t *)a), lc_key(d, *(const uint32_t *)b));
}

static uint32_t *dict_ranks(const struct pfr_lcdict *d)
{
    uint32_t *idx = malloc((d->n + 1) * sizeof(*idx)), *rank = malloc((d->n + 1) * sizeof(*rank));
    if (!idx || !rank) {
        free(idx);
        free(rank);
        return NULL;
    }
    for (size_t i = 0; i < d->n; i++)
        idx[i] = (uint32_t)i;
    qsort_r(idx, d->n, sizeof(*idx), rank_cmp, (void *)d);
    for (size_t i = 0; i < d->n; i++)
        rank[idx[i]] = (uint32_t)i;
    free(idx);
    return rank;
}

/* toUnixTimestamp of a DateTime64(9): whole seconds, rounded down. */
static int64_t unix_secs(int64_t ns)
{
    int64_t s = ns / 1000000000;
    return ns % 1000000000 < 0 ? s - 1 : s;
}

struct okey {
    uint64_t k1, k2, k3; /* the sort key, compared in order */
    uint32_t idx;        /* the row (group) as added: ties keep that order */
};

static int okey_cmp(const void *a, const void *b)
{
    const struct okey *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort keys into an order of indices (malloc'ed), or NULL. */
static uint32_t *okeys_order(struct okey *k, size_t n)
{
    uint32_t *order = malloc((n + 1) * sizeof(*order));
    if (order) {
        qsort(k, n, sizeof(*k), okey_cmp);
        for (size_t i = 0; i < n; i++)
            order[i] = k[i].idx;
    }
    free(k);
    return order;
}

/* The order of the sample groups (ServiceName, Type, toUnixTimestamp(Start),
 * toUnixTimestamp(End)). Seconds are biased so that they compare as unsigned. */
static uint32_t *groups_order(const pfr_ch_columns *c)
{
    uint32_t *rs = dict_ranks(&c->svcs), *rt = dict_ranks(&c->types);
    struct okey *k = malloc((c->ngroups + 1) * sizeof(*k));
    uint32_t *order = NULL;
    if (rs && rt && k) {
        for (size_t g = 0; g < c->ngroups; g++) {
            const struct pfr_sgroup *gr = &c->groups[g];
            k[g] = (struct okey){.k1 = (uint64_t)rs[gr->svc] << 32 | rt[gr->type],
                                 .k2 = (uint64_t)unix_secs(gr->start) ^ 1ull << 63,
                                 .k3 = (uint64_t)unix_secs(gr->end) ^ 1ull << 63,
                                 .idx = (uint32_t)g};
        }
        order = okeys_order(k, c->ngroups);
        k = NULL;
    }
    free(k);
    free(rs);
    free(rt);
    return order;
}

/* The order of the stack rows (ServiceName, Hash), *n of them: of rows with the same key only
 * the last added is kept, the one ReplacingMergeTree keeps, and not at all if skip flags it. So
 * the block has nothing left to collapse and goes with optimize_on_insert = 0 (ClickHouse would
 * merge the sorted block row by row to find no duplicates). */
static uint32_t *strows_order(const pfr_ch_columns *c, const uint8_t *skip, size_t *n)
{
    uint32_t *rs = dict_ranks(&c->svcs);
    struct okey *k = malloc((c->nstrows + 1) * sizeof(*k));
    uint32_t *order = NULL;
    *n = 0;
    if (rs && k) {
        for (size_t i = 0; i < c->nstrows; i++)
            k[i] = (struct okey){
                .k1 = rs[c->strows[i].svc], .k2 = c->strows[i].hash, .idx = (uint32_t)i};
        qsort(k, c->nstrows, sizeof(*k), okey_cmp);
        order = malloc((c->nstrows + 1) * sizeof(*order));
        for (size_t i = 0; order && i < c->nstrows; i++)
            if ((i + 1 == c->nstrows || k[i + 1].k1 != k[i].k1 || k[i + 1].k2 != k[i].k2) &&
                !(skip && skip[k[i].idx]))
                order[(*n)++] = k[i].idx;
    }
    free(k);
    free(rs);
    return order;
}

/* A LowCardinality granule's head: flags, the dictionary, the row count. */
static void lc_head(pfr_buf *b, const struct pfr_lcdict *d, size_t rows)
{
    unsigned w = lc_width(d);
    uint64_t type = w == 1 ? LC_INDEX_UINT8 : w == 2 ? LC_INDEX_UINT16 : LC_INDEX_UINT32;
    pfr_buf_u64le(b, LC_FLAGS | type);
    pfr_buf_u64le(b, d->n);
    for (size_t i = 0; i < d->n; i++)
        put_lcstr(b, d, (uint32_t)i);
    pfr_buf_u64le(b, rows);
}

static void col_head(pfr_buf *b, const char *name, const char *type)
{
    pfr_ch_string(b, name, strlen(name));
    pfr_ch_string(b, type, strlen(type));
}

/* ServiceName or Type of the sample rows (type: Type, else ServiceName); groups in order o. */
static void native_group_lc(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o, bool type)
{
    const struct pfr_lcdict *d = type ? &c->types : &c->svcs;
    col_head(b, type ? "Type" : "ServiceName", "LowCardinality(String)");
    pfr_buf_u64le(b, LC_VERSION);
    lc_head(b, d, c->nrows);
    unsigned w = lc_width(d);
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++)
            put_index(b, w, type ? gr->type : gr->svc);
    }
}

static void native_times(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o, bool end)
{
    col_head(b, end ? "End" : "Start", "DateTime64(9)");
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++)
            pfr_buf_u64le(b, (uint64_t)(end ? gr->end : gr->start));
    }
}

static size_t label_end(const pfr_ch_columns *c, size_t l)
{
    return l + 1 < c->nlabels ? c->labval[l + 1] : c->labvals.len;
}

static void native_labels(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o)
{
    col_head(b, "Labels", "Map(LowCardinality(String), String)");
    pfr_buf_u64le(b, LC_VERSION);
    uint64_t off = 0;
    for (size_t g = 0; g < c->ngroups; g++)
        for (size_t r = 0; r < c->groups[o[g]].nrows; r++)
            pfr_buf_u64le(b, off += c->groups[o[g]].nlab);
    if (!off)
        return; /* no entries: ClickHouse writes no keys granule either */
    lc_head(b, &c->labkeys, off);
    unsigned w = lc_width(&c->labkeys);
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++)
            for (uint32_t l = 0; l < gr->nlab; l++)
                put_index(b, w, c->labkey[gr->lab + l]);
    }
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        if (!gr->nlab)
            continue;
        size_t from = c->labval[gr->lab], to = label_end(c, gr->lab + gr->nlab - 1);
        for (size_t r = 0; r < gr->nrows; r++)
            pfr_buf_put(b, c->labvals.data + from, to - from);
    }
}

static void native_samples(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o)
{
    pfr_buf_uvarint(b, 7);
    pfr_buf_uvarint(b, c->nrows);
    native_group_lc(b, c, o, false);
    native_group_lc(b, c, o, true);
    native_times(b, c, o, false);
    native_times(b, c, o, true);
    native_labels(b, c, o);
    col_head(b, "StackHash", "UInt64");
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++)
            pfr_buf_u64le(b, c->hashes[gr->row + r]);
    }
    col_head(b, "Value", "Int64");
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++)
            pfr_buf_u64le(b, (uint64_t)c->values[gr->row + r]);
    }
}

static void rowbinary_samples(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o)
{
    for (size_t g = 0; g < c->ngroups; g++) {
        const struct pfr_sgroup *gr = &c->groups[o[g]];
        for (size_t r = 0; r < gr->nrows; r++) {
            put_lcstr(b, &c->svcs, gr->svc);
            put_lcstr(b, &c->types, gr->type);
            pfr_buf_u64le(b, (uint64_t)gr->start);
            pfr_buf_u64le(b, (uint64_t)gr->end);
            pfr_buf_uvarint(b, gr->nlab);
            for (uint32_t l = gr->lab; l < gr->lab + gr->nlab; l++) {
                put_lcstr(b, &c->labkeys, c->labkey[l]);
                pfr_buf_put(b, c->labvals.data + c->labval[l], label_end(c, l) - c->labval[l]);
            }
            pfr_buf_u64le(b, c->hashes[gr->row + r]);
            pfr_buf_u64le(b, (uint64_t)c->values[gr->row + r]);
        }
    }
}

static void native_stacks(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o, size_t n)
{
    pfr_buf_uvarint(b, 4);
    pfr_buf_uvarint(b, n);
    col_head(b, "ServiceName", "LowCardinality(String)");
    pfr_buf_u64le(b, LC_VERSION);
    lc_head(b, &c->svcs, n);
    unsigned w = lc_width(&c->svcs);
    for (size_t i = 0; i < n; i++)
        put_index(b, w, c->strows[o[i]].svc);
    col_head(b, "Hash", "UInt64");
    for (size_t i = 0; i < n; i++)
        pfr_buf_u64le(b, c->strows[o[i]].hash);
    col_head(b, "LastSeen", "DateTime64(9)");
    for (size_t i = 0; i < n; i++)
        pfr_buf_u64le(b, (uint64_t)c->strows[o[i]].last_seen);
    col_head(b, "Stack", "Array(String)");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++)
        pfr_buf_u64le(b, off += c->strows[o[i]].nstr);
    for (size_t i = 0; i < n; i++) /* the strings, in row order */
        pfr_buf_put(b, c->stkstr.data + c->strows[o[i]].str, c->strows[o[i]].str_len);
}

static void rowbinary_stacks(pfr_buf *b, const pfr_ch_columns *c, const uint32_t *o, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct pfr_strow *r = &c->strows[o[i]];
        put_lcstr(b, &c->svcs, r->svc);
        pfr_buf_u64le(b, r->hash);
        pfr_buf_u64le(b, (uint64_t)r->last_seen);
        pfr_buf_uvarint(b, r->nstr);
        pfr_buf_put(b, c->stkstr.data + r->str, r->str_len);
    }
}

int pfr_ch_columns_render_samples(const pfr_ch_columns *c, enum pfr_ch_format f, pfr_buf *out)
{
    pfr_buf_reset(out);
    if (c->err)
        return c->err;
    if (!c->nrows)
        return 0;
    uint32_t *o = groups_order(c);
    if (!o || pfr_buf_reserve(out, c->est_samples + 4096) < 0) {
        free(o);
        return -ENOMEM;
    }
    if (f == PFR_CH_NATIVE)
        native_samples(out, c, o);
    else
        rowbinary_samples(out, c, o);
    free(o);
    return out->oom ? -ENOMEM : 0;
}

int pfr_ch_columns_render_stacks(const pfr_ch_columns *c, enum pfr_ch_format f, const uint8_t *skip,
                                 pfr_buf *out)
{
    pfr_buf_reset(out);
    if (c->err)
        return c->err;
    if (!c->nstrows)
        return 0;
    size_t n;
    uint32_t *o = strows_order(c, skip, &n);
    if (!o || (n && pfr_buf_reserve(out, c->stkstr.len + c->nstrows * 40 + 4096) < 0)) {
        free(o);
        return -ENOMEM;
    }
    if (!n) {
        free(o);
        return 0; /* every row left out: no block */
    }
    if (f == PFR_CH_NATIVE)
        native_stacks(out, c, o, n);
    else
        rowbinary_stacks(out, c, o, n);
    free(o);
    return out->oom ? -ENOMEM : 0;
}
