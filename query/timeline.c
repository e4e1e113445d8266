/* Timeline: the value of a profile type per interval, to find the spike worth zooming into. */
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_time.h"
#include "render_internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1000000000LL

int64_t pfr_timeline_auto_step(int64_t from_ns, int64_t to_ns, size_t want)
{
    static const int64_t steps_s[] = {1,     2,     5,     10,    15,     30,    60,
                                      120,   300,   600,   900,   1800,   3600,  7200,
                                      10800, 21600, 43200, 86400, 172800, 604800};
    int64_t span = to_ns - from_ns;
    if (want == 0)
        want = 60;
    for (size_t i = 0; i < sizeof(steps_s) / sizeof(steps_s[0]); i++)
        if (span / (steps_s[i] * NS_PER_S) <= (int64_t)want)
            return steps_s[i] * NS_PER_S;
    return span / (int64_t)want + 1;
}

void pfr_timeline_free(pfr_timeline *tl)
{
    if (!tl)
        return;
    free(tl->values);
    free(tl->chunks);
    free(tl->resolution_ns);
    free(tl);
}

typedef struct tl_ctx {
    pfr_timeline *tl;
    const char *type;
    bool gauge;
    bool decode; /* sample filters: sum the filtered profile instead of the chunk's totals */
} tl_ctx;

static double chunk_value(const tl_ctx *c, const pfr_chunk_meta *m, const pfr_profile *p)
{
    if (!c->decode) {
        for (size_t i = 0; i < m->ntypes; i++)
            if (strcmp(m->types[i], c->type) == 0)
                return (double)m->totals[i];
        return 0;
    }
    int ti = pfr_profile_find_sample_type(p, c->type);
    if (ti < 0)
        return 0;
    double sum = 0;
    size_t n = pfr_profile_num_samples(p);
    for (size_t i = 0; i < n; i++)
        sum += (double)pfr_profile_sample_values(p, i)[ti];
    return sum;
}

/* Spread a chunk's value over the intervals it overlaps, in proportion to the overlap (sums), or
 * as a time-weighted level (gauges). */
static int tl_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *vctx)
{
    tl_ctx *c = vctx;
    pfr_timeline *tl = c->tl;
    double v = chunk_value(c, m, p);
    int64_t len = m->end_ns - m->start_ns;
    if (len <= 0)
        return 0;
    int64_t to = tl->from_ns + (int64_t)tl->n * tl->step_ns;
    int64_t a = m->start_ns > tl->from_ns ? m->start_ns : tl->from_ns;
    int64_t b = m->end_ns < to ? m->end_ns : to;
    for (int64_t t = a; t < b;) {
        size_t i = (size_t)((t - tl->from_ns) / tl->step_ns);
        int64_t bucket_end = tl->from_ns + (int64_t)(i + 1) * tl->step_ns;
        int64_t e = b < bucket_end ? b : bucket_end;
        double share = (double)(e - t) / (double)(c->gauge ? tl->step_ns : len);
        tl->values[i] += v * share;
        tl->chunks[i]++;
        if (len > tl->resolution_ns[i])
            tl->resolution_ns[i] = len;
        t = e;
    }
    return 0;
}

int pfr_query_timeline(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                       int64_t step_ns, pfr_timeline **out, pfr_query_stats *st, char *err,
                       size_t errlen)
{
    if (to_ns <= from_ns) {
        if (errlen)
            snprintf(err, errlen, "empty range: the end is not after the start");
        return -EINVAL;
    }
    if (step_ns <= 0)
        step_ns = pfr_timeline_auto_step(from_ns, to_ns, 60);
    size_t n = (size_t)((to_ns - from_ns + step_ns - 1) / step_ns);
    if (n > 100000) {
        if (errlen)
            snprintf(err, errlen, "too many intervals (%zu); choose a larger --step", n);
        return -EINVAL;
    }
    pfr_timeline *tl = calloc(1, sizeof(*tl));
    if (!tl)
        return -ENOMEM;
    tl->from_ns = from_ns;
    tl->step_ns = step_ns;
    tl->n = n;
    tl->values = calloc(n, sizeof(*tl->values));
    tl->chunks = calloc(n, sizeof(*tl->chunks));
    tl->resolution_ns = calloc(n, sizeof(*tl->resolution_ns));
    if (!tl->values || !tl->chunks || !tl->resolution_ns) {
        pfr_timeline_free(tl);
        return -ENOMEM;
    }
    tl_ctx c = {.tl = tl, .type = p->type, .gauge = p->gauge, .decode = p->nsample_labels > 0};
    pfr_store_filter f = {.from_ns = from_ns,
                          .to_ns = to_ns,
                          .service = p->service,
                          .type = p->type,
                          .labels = p->profile_labels,
                          .nlabels = p->nprofile_labels,
                          .sample_labels = p->sample_labels,
                          .nsample_labels = p->nsample_labels};
    pfr_scan_stats ss = {0};
    int rc = pfr_store_scan(s, &f, c.decode ? 0 : PFR_SCAN_META_ONLY, tl_cb, &c, &ss);
    if (st) {
        st->chunks += ss.chunks;
        st->corrupt += ss.corrupt;
    }
    if (rc == 0 && ss.chunks == 0) {
        char a[48], b[48], what[512];
        pfr_query_plan_describe(p, what, sizeof(what));
        if (errlen)
            snprintf(err, errlen, "no data from %s to %s (%s)",
                     pfr_time_format(from_ns, false, a, sizeof(a)),
                     pfr_time_format(to_ns, false, b, sizeof(b)), what);
        rc = -ENOENT;
    } else if (rc < 0 && errlen) {
        snprintf(err, errlen, "reading the ring: %s", strerror(-rc));
    }
    if (rc < 0) {
        pfr_timeline_free(tl);
        return rc;
    }
    *out = tl;
    return 0;
}

int pfr_timeline_render_text(FILE *out, const pfr_timeline *tl, const pfr_query_plan *p, int width)
{
    static const char *const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const char *unit = pfr_type_unit(p->type);
    char what[512], a[48], v[40], step[32];
    double max = 0, sum = 0;
    if (width <= 0)
        width = 50;
    for (size_t i = 0; i < tl->n; i++) {
        if (tl->values[i] > max)
            max = tl->values[i];
        sum += tl->values[i];
    }
    pfr_query_plan_describe(p, what, sizeof(what));
    fprintf(out, "# %s, every %s%s\n", what, pfr_duration_format(tl->step_ns, step, sizeof(step)),
            p->gauge ? " (mean level)" : "");
    for (size_t i = 0; i < tl->n; i++) {
        int64_t t = tl->from_ns + (int64_t)i * tl->step_ns;
        pfr_time_format(t, false, a, sizeof(a));
        a[19] = '\0'; /* drop the zone: it is the same on every line */
        fprintf(out, "%s %12s ", a,
                tl->chunks[i] ? pfr_format_value(tl->values[i], unit, false, v, sizeof(v)) : "-");
        double cells = max > 0 ? tl->values[i] / max * width : 0;
        int full = (int)cells, part = (int)((cells - full) * 8);
        for (int k = 0; k < full; k++)
            fputs("█", out);
        if (full < width)
            fputs(eighths[part], out);
        if (tl->resolution_ns[i] > tl->step_ns) {
            /* a roll-up: the ring knows this interval only at its tier's step */
            char r[32];
            fprintf(out, "%*s (%s roll-up)", full < width ? width - full - 1 : 0, "",
                    pfr_duration_format(tl->resolution_ns[i], r, sizeof(r)));
        }
        fputc('\n', out);
    }
    if (!p->gauge)
        fprintf(out, "# total %s, peak %s per %s\n", pfr_format_value(sum, unit, false, v, 40),
                pfr_format_value(max, unit, false, a, 40), step);
    return ferror(out) ? -EIO : 0;
}

int pfr_timeline_render_json(FILE *out, const pfr_timeline *tl, const pfr_query_plan *p)
{
    char t[48];
    json_t *points = json_array();
    for (size_t i = 0; points && i < tl->n; i++) {
        int64_t ts = tl->from_ns + (int64_t)i * tl->step_ns;
        json_t *pt = json_pack("{s:s, s:I, s:f, s:I, s:I}", "time",
                               pfr_time_format_rfc3339(ts, t, sizeof(t)), "time_ns", (json_int_t)ts,
                               "value", tl->values[i], "chunks", (json_int_t)tl->chunks[i],
                               "resolution_ns", (json_int_t)tl->resolution_ns[i]);
        if (!pt || json_array_append_new(points, pt)) {
            json_decref(points);
            return -ENOMEM;
        }
    }
    json_t *doc =
        json_pack("{s:o, s:o, s:o?, s:b, s:I, s:I, s:o}", "type", pfr_json_text(p->type), "unit",
                  pfr_json_text(pfr_type_unit(p->type)), "service",
                  p->service ? pfr_json_text(p->service) : NULL, "gauge", p->gauge, "from_ns",
                  (json_int_t)tl->from_ns, "step_ns", (json_int_t)tl->step_ns, "points", points);
    if (!doc)
        return -ENOMEM;
    int rc = json_dumpf(doc, out, JSON_INDENT(1) | JSON_REAL_PRECISION(12)) ? -EIO : 0;
    json_decref(doc);
    fputc('\n', out);
    return rc == 0 && ferror(out) ? -EIO : rc;
}
