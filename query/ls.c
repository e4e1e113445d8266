/* `pfr ls`: services, profile types, label values and time coverage (with gaps) of the ring. */
#include "pfr_query.h"
#include "pfr_time.h"
#include "render_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    int64_t a, b;
} span;

typedef struct svc_acc {
    span *spans;
    size_t nspans, cap;
} svc_acc;

typedef struct ls_ctx {
    pfr_ls *ls;
    svc_acc *acc; /* parallel to ls->services */
    size_t cap;
    size_t last; /* index of the last service looked up */
} ls_ctx;

static int add_sorted(char ***v, size_t *n, const char *s)
{
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp((*v)[mid], s);
        if (c == 0)
            return 0;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    memmove(nv + lo + 1, nv + lo, (*n - lo) * sizeof(*nv));
    nv[lo] = copy;
    (*n)++;
    return 0;
}

static pfr_ls_service *find_service(ls_ctx *c, const char *name, bool create)
{
    pfr_ls *ls = c->ls;
    if (c->last < ls->nservices && strcmp(ls->services[c->last].name, name) == 0)
        return &ls->services[c->last];
    for (size_t i = 0; i < ls->nservices; i++)
        if (strcmp(ls->services[i].name, name) == 0) {
            c->last = i;
            return &ls->services[i];
        }
    if (!create)
        return NULL;
    if (ls->nservices == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        pfr_ls_service *v = realloc(ls->services, cap * sizeof(*v));
        if (!v)
            return NULL;
        ls->services = v;
        svc_acc *a = realloc(c->acc, cap * sizeof(*a));
        if (!a)
            return NULL;
        c->acc = a;
        c->cap = cap;
    }
    pfr_ls_service *s = &ls->services[ls->nservices];
    memset(s, 0, sizeof(*s));
    memset(&c->acc[ls->nservices], 0, sizeof(*c->acc));
    s->name = strdup(name);
    if (!s->name)
        return NULL;
    c->last = ls->nservices++;
    return s;
}

static int add_label(pfr_ls_service *s, const char *key, const char *value)
{
    size_t i = 0;
    while (i < s->nlabels && strcmp(s->labels[i].key, key) < 0)
        i++;
    if (i == s->nlabels || strcmp(s->labels[i].key, key) != 0) {
        pfr_ls_label *v = realloc(s->labels, (s->nlabels + 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->labels = v;
        memmove(v + i + 1, v + i, (s->nlabels - i) * sizeof(*v));
        memset(&v[i], 0, sizeof(v[i]));
        s->nlabels++;
        if (!(v[i].key = strdup(key)))
            return -ENOMEM;
    }
    return add_sorted(&s->labels[i].values, &s->labels[i].nvalues, value);
}

static int stream_cb(const pfr_stream_info *si, void *vctx)
{
    ls_ctx *c = vctx;
    pfr_ls_service *s = find_service(c, si->service, true);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < si->ntypes; i++)
        if (add_sorted(&s->types, &s->ntypes, si->types[i]) < 0)
            return -ENOMEM;
    for (size_t i = 0; i < si->nlabels; i++)
        if (add_label(s, si->labels[i].key, si->labels[i].value) < 0)
            return -ENOMEM;
    s->streams++;
    return 0;
}

static int chunk_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *vctx)
{
    ls_ctx *c = vctx;
    (void)p;
    pfr_ls_service *s = find_service(c, m->service, true);
    if (!s)
        return -ENOMEM;
    svc_acc *a = &c->acc[s - c->ls->services];
    if (a->nspans == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        span *v = realloc(a->spans, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        a->spans = v;
        a->cap = cap;
    }
    a->spans[a->nspans++] = (span){m->start_ns, m->end_ns};
    s->chunks++;
    return 0;
}

static int cmp_span(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a ? 1 : (a->b < b->b ? -1 : a->b > b->b);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Coverage of one service: first/last, the median chunk length, holes longer than two chunks. */
static int coverage(pfr_ls_service *s, svc_acc *a)
{
    if (!a->nspans)
        return 0;
    int64_t *lens = malloc(a->nspans * sizeof(*lens));
    if (!lens)
        return -ENOMEM;
    for (size_t i = 0; i < a->nspans; i++)
        lens[i] = a->spans[i].b - a->spans[i].a;
    qsort(lens, a->nspans, sizeof(*lens), cmp_i64);
    s->typical_chunk_ns = lens[a->nspans / 2];
    free(lens);
    qsort(a->spans, a->nspans, sizeof(*a->spans), cmp_span);
    int64_t min_gap = 2 * s->typical_chunk_ns;
    if (min_gap < 1000000000LL)
        min_gap = 1000000000LL;
    s->first_ns = a->spans[0].a;
    int64_t end = a->spans[0].b;
    for (size_t i = 1; i < a->nspans; i++) {
        if (a->spans[i].a - end > min_gap) {
            pfr_ls_gap *g = realloc(s->gaps, (s->ngaps + 1) * sizeof(*g));
            if (!g)
                return -ENOMEM;
            s->gaps = g;
            g[s->ngaps++] = (pfr_ls_gap){end, a->spans[i].a};
        }
        if (a->spans[i].b > end)
            end = a->spans[i].b;
    }
    s->last_ns = end;
    return 0;
}

static int cmp_service(const void *x, const void *y)
{
    return strcmp(((const pfr_ls_service *)x)->name, ((const pfr_ls_service *)y)->name);
}

static int tier_cb(const pfr_tier_info *t, void *ctx)
{
    pfr_ls *ls = ctx;
    if (ls->ntiers < sizeof(ls->tiers) / sizeof(ls->tiers[0]))
        ls->tiers[ls->ntiers++] = *t;
    return 0;
}

int pfr_query_ls(pfr_store *st, pfr_ls **out, char *err, size_t errlen)
{
    ls_ctx c = {0};
    c.ls = calloc(1, sizeof(*c.ls));
    if (!c.ls)
        return -ENOMEM;
    int rc = pfr_store_stats_get(st, &c.ls->stats);
    if (rc == 0)
        rc = pfr_store_tiers_list(st, tier_cb, c.ls);
    if (rc == 0)
        rc = pfr_store_streams(st, stream_cb, &c);
    pfr_store_filter all = {0};
    if (rc == 0)
        rc = pfr_store_scan(st, &all, PFR_SCAN_META_ONLY, chunk_cb, &c, NULL);
    for (size_t i = 0; rc == 0 && i < c.ls->nservices; i++)
        rc = coverage(&c.ls->services[i], &c.acc[i]);
    for (size_t i = 0; i < c.ls->nservices; i++)
        free(c.acc[i].spans);
    free(c.acc);
    if (rc < 0) {
        if (errlen)
            snprintf(err, errlen, "reading the ring: %s", strerror(-rc));
        pfr_ls_free(c.ls);
        return rc;
    }
    qsort(c.ls->services, c.ls->nservices, sizeof(*c.ls->services), cmp_service);
    *out = c.ls;
    return 0;
}

void pfr_ls_free(pfr_ls *ls)
{
    if (!ls)
        return;
    for (size_t i = 0; i < ls->nservices; i++) {
        pfr_ls_service *s = &ls->services[i];
        free(s->name);
        for (size_t k = 0; k < s->ntypes; k++)
            free(s->types[k]);
        free(s->types);
        for (size_t k = 0; k < s->nlabels; k++) {
            free(s->labels[k].key);
            for (size_t j = 0; j < s->labels[k].nvalues; j++)
                free(s->labels[k].values[j]);
            free(s->labels[k].values);
        }
        free(s->labels);
        free(s->gaps);
    }
    free(ls->services);
    free(ls);
}

static double mib(uint64_t bytes)
{
    return (double)bytes / 1048576.0;
}

/* The ring's size against its cap, the cap in force when the disk lowers it, and what was given
 * up for room. */
/* What each tier covers, finest first: "as recorded from T (N MiB), 1m from T, ..." (only once
 * the ring has rolled chunks up). */
static void tiers_text(FILE *out, const pfr_ls *ls)
{
    if (ls->ntiers < 2 && !(ls->ntiers == 1 && ls->tiers[0].tier > 0))
        return;
    fprintf(out, "      tiers:");
    for (size_t i = 0; i < ls->ntiers; i++) {
        const pfr_tier_info *t = &ls->tiers[i];
        char a[48], d[32];
        if (t->tier == 0)
            snprintf(d, sizeof(d), "as recorded");
        else
            pfr_duration_format(t->step_ns, d, sizeof(d));
        fprintf(out, "%s %s from %s (%.1f MiB)", i ? "," : "", d,
                pfr_time_format(t->first_ns, false, a, sizeof(a)), mib(t->bytes));
    }
    fprintf(out, "\n");
}

static void ring_text(FILE *out, const pfr_ls *ls)
{
    const pfr_store_stats *st = &ls->stats;
    char a[48], b[48];
    fprintf(out, "ring: %llu chunks, %.1f MiB of %.1f MiB", (unsigned long long)st->chunks,
            mib(st->file_bytes), mib(st->max_bytes));
    if (st->chunks)
        fprintf(out, ", %s to %s", pfr_time_format(st->oldest_ns, false, a, sizeof(a)),
                pfr_time_format(st->newest_ns, false, b, sizeof(b)));
    fprintf(out, "\n");
    tiers_text(out, ls);
    if (st->cap_reason != PFR_STORE_CAP_CONFIGURED)
        fprintf(out,
                "      cap %.1f MiB, effective %.1f MiB: %s (%.1f MiB kept free, %.1f MiB free "
                "now)\n",
                mib(st->max_bytes), mib(st->effective_max_bytes),
                pfr_store_cap_reason_name(st->cap_reason), mib(st->reserve_bytes),
                mib(st->fs_free_bytes));
    if (st->evicted || st->corrupt)
        fprintf(out, "      %llu chunks evicted (%llu of them for disk space), %llu corrupt seen\n",
                (unsigned long long)st->evicted, (unsigned long long)st->evicted_disk,
                (unsigned long long)st->corrupt);
    if (st->dropped_disk)
        fprintf(out, "      %llu profiles not written: the disk was full, nothing older left\n",
                (unsigned long long)st->dropped_disk);
    if (st->pins || st->pins_released)
        fprintf(out,
                "      pins: %llu, keeping %.1f KiB of their %.1f MiB budget (pfr pins); %llu "
                "released for room so far\n",
                (unsigned long long)st->pins, (double)st->pinned_bytes / 1024.0,
                mib(st->pin_max_bytes), (unsigned long long)st->pins_released);
    if (st->bad_counters)
        fprintf(out,
                "      warning: %llu of the ring's counters are out of range (a damaged or "
                "edited file): shown at their bounds\n",
                (unsigned long long)st->bad_counters);
}

int pfr_ls_render_text(FILE *out, const pfr_ls *ls, size_t max_values)
{
    char a[48], b[48], d[32];
    if (!max_values)
        max_values = 10;
    ring_text(out, ls);
    if (!ls->nservices)
        fprintf(out, "no profiles recorded yet\n");
    for (size_t i = 0; i < ls->nservices; i++) {
        const pfr_ls_service *s = &ls->services[i];
        fputs("\nservice ", out);
        pfr_text_put(out, s->name, PFR_TEXT_QUOTE);
        fputc('\n', out);
        fprintf(out, "  chunks    %llu in %llu streams, typically %s each\n",
                (unsigned long long)s->chunks, (unsigned long long)s->streams,
                pfr_duration_format(s->typical_chunk_ns, d, sizeof(d)));
        if (s->chunks)
            fprintf(out, "  covers    %s to %s\n",
                    pfr_time_format(s->first_ns, false, a, sizeof(a)),
                    pfr_time_format(s->last_ns, false, b, sizeof(b)));
        fprintf(out, "  types    ");
        for (size_t k = 0; k < s->ntypes; k++) {
            fputc(' ', out);
            pfr_text_put(out, s->types[k], PFR_TEXT_QUOTE);
        }
        fprintf(out, "\n");
        for (size_t k = 0; k < s->nlabels; k++) {
            const pfr_ls_label *l = &s->labels[k];
            fputs("  label     ", out);
            pfr_text_put(out, l->key, PFR_TEXT_QUOTE);
            fputc(':', out);
            for (size_t j = 0; j < l->nvalues && j < max_values; j++) {
                fputc(' ', out);
                pfr_text_put(out, l->values[j], PFR_TEXT_QUOTE);
            }
            if (l->nvalues > max_values)
                fprintf(out, " ... (%zu values)", l->nvalues);
            fprintf(out, "\n");
        }
        if (!s->ngaps && s->chunks)
            fprintf(out, "  gaps      none\n");
        for (size_t k = 0; k < s->ngaps && k < max_values; k++)
            fprintf(out, "  gap       %s to %s (%s)\n",
                    pfr_time_format(s->gaps[k].from_ns, false, a, sizeof(a)),
                    pfr_time_format(s->gaps[k].to_ns, false, b, sizeof(b)),
                    pfr_duration_format(s->gaps[k].to_ns - s->gaps[k].from_ns, d, sizeof(d)));
        if (s->ngaps > max_values)
            fprintf(out, "  gaps      ... %zu in all\n", s->ngaps);
    }
    return ferror(out) ? -EIO : 0;
}

static json_t *str_array(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, pfr_json_text(v[i]));
    return a;
}

int pfr_ls_render_json(FILE *out, const pfr_ls *ls)
{
    char a[48], b[48];
    json_t *services = json_array();
    for (size_t i = 0; services && i < ls->nservices; i++) {
        const pfr_ls_service *s = &ls->services[i];
        json_t *labels = json_object(), *gaps = json_array();
        for (size_t k = 0; labels && k < s->nlabels; k++)
            pfr_json_set_text_key(labels, s->labels[k].key,
                                  str_array(s->labels[k].values, s->labels[k].nvalues));
        for (size_t k = 0; gaps && k < s->ngaps; k++)
            json_array_append_new(
                gaps,
                json_pack("{s:s, s:s, s:I, s:I}", "from",
                          pfr_time_format_rfc3339(s->gaps[k].from_ns, a, sizeof(a)), "to",
                          pfr_time_format_rfc3339(s->gaps[k].to_ns, b, sizeof(b)), "from_ns",
                          (json_int_t)s->gaps[k].from_ns, "to_ns", (json_int_t)s->gaps[k].to_ns));
        json_array_append_new(
            services,
            json_pack("{s:o, s:o, s:o, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:o}", "name",
                      pfr_json_text(s->name), "types", str_array(s->types, s->ntypes), "labels",
                      labels, "streams", (json_int_t)s->streams, "chunks", (json_int_t)s->chunks,
                      "first", pfr_time_format_rfc3339(s->first_ns, a, sizeof(a)), "last",
                      pfr_time_format_rfc3339(s->last_ns, b, sizeof(b)), "first_ns",
                      (json_int_t)s->first_ns, "last_ns", (json_int_t)s->last_ns,
                      "typical_chunk_ns", (json_int_t)s->typical_chunk_ns, "gaps", gaps));
    }
    json_t *tiers = json_array();
    for (size_t i = 0; tiers && i < ls->ntiers; i++) {
        const pfr_tier_info *t = &ls->tiers[i];
        json_array_append_new(tiers, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "tier", t->tier,
                                               "step_ns", (json_int_t)t->step_ns, "chunks",
                                               (json_int_t)t->chunks, "bytes", (json_int_t)t->bytes,
                                               "first_ns", (json_int_t)t->first_ns, "last_ns",
                                               (json_int_t)t->last_ns));
    }
    const pfr_store_stats *st = &ls->stats;
    json_t *doc = json_pack(
        "{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:I, s:I, s:o}, s:o}",
        "ring", "chunks", (json_int_t)st->chunks, "file_bytes", (json_int_t)st->file_bytes,
        "max_bytes", (json_int_t)st->max_bytes, "oldest_ns", (json_int_t)st->oldest_ns, "newest_ns",
        (json_int_t)st->newest_ns, "evicted", (json_int_t)st->evicted, "corrupt",
        (json_int_t)st->corrupt, "effective_max_bytes", (json_int_t)st->effective_max_bytes,
        "cap_reason", st->cap_reason == PFR_STORE_CAP_DISK_RESERVE ? "disk_reserve" : "configured",
        "reserve_bytes", (json_int_t)st->reserve_bytes, "fs_bytes", (json_int_t)st->fs_bytes,
        "fs_free_bytes", (json_int_t)st->fs_free_bytes, "evicted_disk",
        (json_int_t)st->evicted_disk, "dropped_disk", (json_int_t)st->dropped_disk, "rolled_up",
        (json_int_t)st->rolled_up, "lost_unshipped", (json_int_t)st->lost_unshipped, "pins",
        (json_int_t)st->pins, "pinned_bytes", (json_int_t)st->pinned_bytes, "pin_max_bytes",
        (json_int_t)st->pin_max_bytes, "pins_released", (json_int_t)st->pins_released, "tiers",
        tiers, "services", services);
    if (!doc)
        return -ENOMEM;
    int rc = json_dumpf(doc, out, JSON_INDENT(2)) ? -EIO : 0;
    json_decref(doc);
    fputc('\n', out);
    return rc == 0 && ferror(out) ? -EIO : rc;
}
