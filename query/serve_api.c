/* The JSON API of `pfr serve`, as plain functions over the query engine (no HTTP here). */
#include "pfr_serve.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_diff.h"
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_time.h"
#include "pfr_names.h"
#include "pfr_utf8.h"
#include "render_internal.h"

#define JSON_TYPE  "application/json; charset=utf-8"
#define MAX_LABELS 32
#define NS_PER_S   1000000000LL

pfr_serve_limits pfr_serve_limits_resolve(const pfr_serve_limits *in)
{
    pfr_serve_limits l = in ? *in : (pfr_serve_limits){0};
    if (l.max_range_ns <= 0)
        l.max_range_ns = 31LL * 86400 * NS_PER_S;
    if (l.timeout_ns <= 0)
        l.timeout_ns = 20 * NS_PER_S;
    if (!l.max_queries)
        l.max_queries = 2;
    if (!l.max_points)
        l.max_points = 2000;
    if (!l.max_top)
        l.max_top = 200;
    if (!l.max_conns)
        l.max_conns = 64;
    if (!l.idle_timeout_s)
        l.idle_timeout_s = 30;
    if (!l.max_conns_per_ip)
        l.max_conns_per_ip = l.max_conns / 4 ? l.max_conns / 4 : 1;
    if (l.header_timeout_ns <= 0)
        l.header_timeout_ns = 10 * NS_PER_S;
    if (l.request_timeout_ns <= 0)
        l.request_timeout_ns = l.timeout_ns + 30 * NS_PER_S;
    if (!l.cache_bytes)
        l.cache_bytes = 64u << 20;
    return l;
}

void pfr_serve_response_free(pfr_serve_response *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

static bool valid_utf8(const char *s)
{
    int32_t cp;
    for (size_t n, left = strlen(s); left; s += n, left -= n)
        if (!(n = pfr_utf8_seq((const unsigned char *)s, left, &cp)))
            return false;
    return true;
}

/* Messages quote what the client sent: bytes that are not UTF-8 become '?' (JSON needs it). */
static void make_utf8(char *s)
{
    int32_t cp;
    for (size_t n, left = strlen(s); left; s += n, left -= n)
        if (!(n = pfr_utf8_seq((const unsigned char *)s, left, &cp))) {
            *s = '?';
            n = 1;
        }
}

int pfr_serve_response_error(pfr_serve_response *r, unsigned status, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    make_utf8(msg);
    pfr_serve_response_free(r);
    r->status = status;
    r->content_type = JSON_TYPE;
    json_t *doc = json_pack("{s:s, s:i}", "error", msg, "status", (int)status);
    r->body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!r->body)
        return -ENOMEM;
    r->len = strlen(r->body);
    return 0;
}

bool pfr_serve_api_path(const char *path)
{
    return strncmp(path, "/api/", 5) == 0;
}

/* ---- a request: its arguments, parsed once ---- */
typedef struct request {
    const pfr_serve_api *api;
    const pfr_kv *args;
    size_t nargs;
    int64_t now_ns;
    pfr_serve_response *out;
    /* the filters and the range, when the endpoint takes them */
    pfr_query q;
    pfr_kv labels[MAX_LABELS];
    char *label_keys[MAX_LABELS];
    int64_t from_ns, to_ns;
    pfr_store *store;
    pfr_query_plan *plan;
} request;

static const char *arg(const request *r, const char *key)
{
    for (size_t i = 0; i < r->nargs; i++)
        if (strcmp(r->args[i].key, key) == 0)
            return r->args[i].value;
    return NULL;
}

/* Every error ends up here: a JSON body and a status; returns -1 so callers can stop. */
static int fail(request *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(request *r, unsigned status, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pfr_serve_response_error(r->out, status, "%s", msg);
    return -1;
}

/* The status for an engine error: unknown service/type/label or nothing in range is a 404, a
 * bad or ambiguous argument a 400, anything else (the ring) a 500. */
static int fail_engine(request *r, int rc, const char *what, const char *err)
{
    unsigned status = rc == -ENOENT ? 404 : rc == -EINVAL ? 400 : 500;
    return fail(r, status, "%s%s%s", what ? what : "", what ? ": " : "",
                err && err[0] ? err : strerror(-rc));
}

/* Arguments an endpoint does not know are refused, so a typo is not silently ignored. */
static int check_args(request *r, const char *const *known)
{
    for (size_t i = 0; i < r->nargs; i++) {
        const char *const *k = known;
        while (*k && strcmp(*k, r->args[i].key) != 0)
            k++;
        if (!*k)
            return fail(r, 400, "unknown argument \"%s\"", r->args[i].key);
    }
    return 0;
}

static int parse_time_arg(request *r, const char *name, const char *def, int64_t *ns)
{
    const char *s = arg(r, name);
    char err[1024];
    if (pfr_time_parse(s ? s : def, r->now_ns, ns, err, sizeof(err)) < 0)
        return fail(r, 400, "bad %s \"%s\": %s", name, s ? s : def, err);
    return 0;
}

static int check_range(request *r, const char *what, int64_t from, int64_t to)
{
    char a[32], b[32];
    if (to <= from)
        return fail(r, 400, "empty %s: its end is not after its start", what);
    if (to - from > r->api->limits.max_range_ns)
        return fail(r, 400, "%s too long (%s): at most %s (pfr serve --max-range)", what,
                    pfr_duration_format(to - from, a, sizeof(a)),
                    pfr_duration_format(r->api->limits.max_range_ns, b, sizeof(b)));
    return 0;
}

static int parse_labels(request *r)
{
    for (size_t i = 0; i < r->nargs; i++) {
        if (strcmp(r->args[i].key, "label") != 0)
            continue;
        const char *v = r->args[i].value, *eq = strchr(v, '=');
        if (!eq || eq == v)
            return fail(r, 400, "bad label \"%s\": expected key=value, e.g. label=pid=1234", v);
        if (r->q.nlabels == MAX_LABELS)
            return fail(r, 400, "too many labels (at most %d)", MAX_LABELS);
        char *key = strndup(v, (size_t)(eq - v));
        if (!key)
            return fail(r, 500, "out of memory");
        r->label_keys[r->q.nlabels] = key;
        r->labels[r->q.nlabels] = (pfr_kv){.key = key, .value = eq + 1};
        r->q.nlabels++;
    }
    r->q.labels = r->labels;
    return 0;
}

static int open_ring(request *r)
{
    const char *path = r->api->store_path;
    char err[512] = "";
    if (access(path, F_OK) != 0) {
        r->out->retry_after = 10;
        return fail(r, 503, "no ring at %s (is pfr-recorder running?)", path);
    }
    pfr_store_opts so = {.read_only = true};
    int rc = pfr_store_open(path, &so, &r->store, err, sizeof(err));
    if (rc < 0)
        return fail(r, 500, "cannot open the ring %s: %s", path, err[0] ? err : strerror(-rc));
    return 0;
}

/* service, type, label, from, to; then the ring is opened and the query planned. */
static int prepare(request *r, const char *default_from)
{
    const char *svc = arg(r, "service"), *type = arg(r, "type");
    r->q.service = svc && svc[0] ? svc : NULL;
    r->q.type = type && type[0] ? type : NULL;
    if (parse_labels(r) || parse_time_arg(r, "from", default_from, &r->from_ns) ||
        parse_time_arg(r, "to", "now", &r->to_ns) || check_range(r, "range", r->from_ns, r->to_ns))
        return -1;
    if (open_ring(r))
        return -1;
    char err[1024] = "";
    int rc = pfr_query_plan_new(r->store, &r->q, &r->plan, err, sizeof(err));
    return rc < 0 ? fail_engine(r, rc, NULL, err) : 0;
}

static void request_free(request *r)
{
    pfr_query_plan_free(r->plan);
    if (r->store)
        pfr_store_close(r->store);
    for (size_t i = 0; i < r->q.nlabels; i++)
        free(r->label_keys[i]);
}

/* ---- writing bodies ---- */
typedef struct body {
    FILE *f;
    char *buf;
    size_t len;
} body;

static int body_open(request *r, body *b)
{
    b->buf = NULL;
    b->len = 0;
    b->f = open_memstream(&b->buf, &b->len);
    return b->f ? 0 : fail(r, 500, "out of memory");
}

/* Close and hand the body to the response (status 200), or answer 500 when writing failed. */
static int body_finish(request *r, body *b, int rc)
{
    bool bad = rc < 0 || ferror(b->f);
    if (fclose(b->f) != 0)
        bad = true;
    if (bad) {
        free(b->buf);
        return fail(r, 500, "rendering failed: %s", strerror(rc < 0 ? -rc : EIO));
    }
    pfr_serve_response_free(r->out);
    r->out->status = 200;
    r->out->content_type = JSON_TYPE;
    r->out->body = b->buf;
    r->out->len = b->len;
    return 0;
}

static int dump_json(FILE *f, json_t *v)
{
    if (!v)
        return -ENOMEM;
    int rc = json_dumpf(v, f, JSON_COMPACT | JSON_REAL_PRECISION(10) | JSON_ENCODE_ANY) ? -EIO : 0;
    json_decref(v);
    return rc;
}

/* ---- /api/ls ---- */
/* The busiest service of the ring's last hour: the most CPU (ebpf:cpu:nanoseconds), else the
 * most chunks. The page opens on it (not on the first by name, which may be an idle one). */
struct busy {
    char *name[256];
    int64_t cpu[256];
    uint64_t chunks[256];
    size_t n;
};

static int busy_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct busy *b = ctx;
    size_t i = 0;
    while (i < b->n && strcmp(b->name[i], m->service) != 0)
        i++;
    if (i == b->n) {
        if (b->n == 256 || !(b->name[i] = strdup(m->service)))
            return 0; /* past 256 services: the first 256 compete */
        b->n++;
    }
    b->chunks[i]++;
    for (size_t t = 0; t < m->ntypes; t++)
        if (strcmp(m->types[t], "ebpf:cpu:nanoseconds") == 0)
            b->cpu[i] += m->totals[t];
    return 0;
}

static json_t *busiest(pfr_store *s)
{
    pfr_store_stats st;
    struct busy *b = calloc(1, sizeof(*b));
    if (!b || pfr_store_stats_quick(s, &st) != 0 || !st.newest_ns) {
        free(b);
        return json_null();
    }
    pfr_store_filter f = {.from_ns = st.newest_ns - 3600 * 1000000000LL, .to_ns = st.newest_ns};
    json_t *out = json_null();
    if (pfr_store_scan(s, &f, PFR_SCAN_META_ONLY, busy_cb, b, NULL) >= 0 && b->n) {
        size_t best = 0;
        for (size_t i = 1; i < b->n; i++)
            if (b->cpu[i] > b->cpu[best] ||
                (b->cpu[i] == b->cpu[best] && b->chunks[i] > b->chunks[best]))
                best = i;
        out = pfr_json_text(b->name[best]);
    }
    for (size_t i = 0; i < b->n; i++)
        free(b->name[i]);
    free(b);
    return out;
}

/* The pins (pfr pin, the recorder's triggers), for the page's timeline. */
static int pin_cb(const pfr_pin_info *p, void *ctx)
{
    json_t *labels = json_object();
    for (size_t i = 0; labels && i < p->nlabels; i++)
        json_object_set_new(labels, p->labels[i].key, pfr_json_text(p->labels[i].value));
    json_t *j =
        json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:b, s:I, s:I}", "id", (json_int_t)p->id,
                  "from_ns", (json_int_t)p->from_ns, "to_ns", (json_int_t)p->to_ns, "service",
                  p->service ? pfr_json_text(p->service) : json_null(), "labels",
                  labels ? labels : json_object(), "reason", pfr_json_text(p->reason), "origin",
                  pfr_json_text(p->origin), "automatic", p->automatic, "created_ns",
                  (json_int_t)p->created_ns, "bytes", (json_int_t)p->bytes);
    return j && json_array_append_new(ctx, j) == 0 ? 0 : -ENOMEM;
}

static int api_ls(request *r)
{
    static const char *const known[] = {NULL};
    if (check_args(r, known) || open_ring(r))
        return -1;
    pfr_ls *ls = NULL;
    char err[512] = "";
    int rc = pfr_query_ls(r->store, &ls, err, sizeof(err));
    if (rc < 0)
        return fail_engine(r, rc, "reading the ring", err);
    body b;
    if (body_open(r, &b)) {
        pfr_ls_free(ls);
        return -1;
    }
    const pfr_serve_limits *l = &r->api->limits;
    fprintf(b.f,
            "{\"now_ns\":%lld,\"limits\":{\"max_range_ns\":%lld,\"max_points\":%zu,"
            "\"timeout_ns\":%lld},\"ls\":",
            (long long)r->now_ns, (long long)l->max_range_ns, l->max_points,
            (long long)l->timeout_ns);
    rc = pfr_ls_render_json(b.f, ls);
    pfr_ls_free(ls);
    json_t *pins = json_array();
    if (!rc && pins && pfr_store_pins(r->store, pin_cb, pins) < 0)
        json_array_clear(pins); /* a ring without pins to read: none shown */
    if (!rc) {
        fputs(",\"busiest\":", b.f);
        rc = dump_json(b.f, busiest(r->store));
    }
    if (!rc) {
        fputs(",\"pins\":", b.f);
        rc = dump_json(b.f, pins);
        pins = NULL;
    }
    json_decref(pins);
    fputs("}", b.f);
    return body_finish(r, &b, rc);
}

/* ---- /api/timeline ---- */
static int api_timeline(request *r)
{
    static const char *const known[] = {"service", "type", "label",  "from",
                                        "to",      "step", "points", NULL};
    if (check_args(r, known) || prepare(r, "-1h"))
        return -1;
    int64_t step = 0, span = r->to_ns - r->from_ns;
    size_t maxp = r->api->limits.max_points;
    const char *s = arg(r, "step"), *p = arg(r, "points");
    char err[1024] = "";
    if (s && pfr_duration_parse(s, &step, err, sizeof(err)) < 0)
        return fail(r, 400, "bad step \"%s\": %s", s, err);
    if (!s) {
        char *end;
        long n = p ? strtol(p, &end, 10) : 60;
        if (p && (end == p || *end || n < 1 || (size_t)n > maxp))
            return fail(r, 400, "bad points \"%s\": expected a count from 1 to %zu", p, maxp);
        step = pfr_timeline_auto_step(r->from_ns, r->to_ns, (size_t)n);
    }
    if ((span + step - 1) / step > (int64_t)maxp)
        return fail(r, 400, "too many intervals (%lld): at most %zu; choose a larger step",
                    (long long)((span + step - 1) / step), maxp);
    pfr_timeline *tl = NULL;
    pfr_query_stats st = {0};
    int rc = pfr_query_timeline(r->store, r->plan, r->from_ns, r->to_ns, step, &tl, &st, err,
                                sizeof(err));
    if (rc < 0)
        return fail_engine(r, rc, NULL, err);
    body b;
    if (body_open(r, &b)) {
        pfr_timeline_free(tl);
        return -1;
    }
    fprintf(b.f, "{\"from_ns\":%lld,\"to_ns\":%lld,\"chunks\":%llu,\"corrupt\":%llu,\"timeline\":",
            (long long)r->from_ns, (long long)r->to_ns, (unsigned long long)st.chunks,
            (unsigned long long)st.corrupt);
    rc = pfr_timeline_render_json(b.f, tl, r->plan);
    fputs("}", b.f);
    pfr_timeline_free(tl);
    return body_finish(r, &b, rc);
}

/* ---- /api/flame and /api/diff ---- */
static const char *plan_service(const pfr_query_plan *p)
{
    return p->service ? p->service : p->nservices == 1 ? p->services[0] : "all services";
}

static int parse_min_width(request *r, double *share)
{
    const char *s = arg(r, "min_width");
    *share = 0.0001; /* as the html page: 0.01 % */
    if (!s)
        return 0;
    char *end;
    double pct = strtod(s, &end);
    if (end == s || *end || !(pct >= 0 && pct < 100))
        return fail(r, 400, "bad min_width \"%s\": expected a percentage such as 0.01", s);
    *share = pct / 100;
    return 0;
}

static int parse_top(request *r, size_t *rows)
{
    const char *s = arg(r, "top");
    *rows = 50;
    if (!s)
        return 0;
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || *end || n < 0 || (size_t)n > r->api->limits.max_top)
        return fail(r, 400, "bad top \"%s\": expected a count from 0 to %zu", s,
                    r->api->limits.max_top);
    *rows = (size_t)n;
    return 0;
}

static json_t *top_row(const pfr_tree *t, uint32_t name, uint32_t module)
{
    char pkg[512];
    const char *n = pfr_tree_str(t, name), *m = pfr_tree_str(t, module);
    return json_pack("{s:o, s:o}", "name", pfr_json_text(n), "package",
                     pfr_json_text(pfr_frame_package(n, m, pkg, sizeof(pkg))));
}

/* The heaviest functions by self value (the engine's per-function aggregates). */
static json_t *top_flame(const pfr_tree *t, size_t rows)
{
    pfr_tree_func *f;
    size_t n;
    if (pfr_tree_functions(t, &f, &n) < 0)
        return NULL;
    qsort(f, n, sizeof(*f), pfr_tree_func_cmp_self);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n && i < rows; i++) {
        json_t *row = top_row(t, f[i].name, f[i].module);
        if (!row || json_object_set_new(row, "self", json_real(f[i].self[0])) ||
            json_object_set_new(row, "total", json_real(f[i].total[0])) ||
            json_array_append_new(a, row)) {
            json_decref(a);
            a = NULL;
        }
    }
    free(f);
    return a;
}

/* The largest changes (pfr_diff_rows), rates per second; unchanged functions left out. */
static json_t *top_diff(const pfr_tree *t, const double norm[2], size_t rows)
{
    pfr_diff_row *d;
    size_t n;
    if (pfr_diff_rows(t, norm, &d, &n) < 0)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; a && i < n && json_array_size(a) < rows; i++) {
        if (d[i].base_self == d[i].comp_self && d[i].base_total == d[i].comp_total)
            continue;
        json_t *row = top_row(t, d[i].name, d[i].module);
        if (!row ||
            json_object_set_new(row, "change",
                                json_real(pfr_diff_change(d[i].base_self, d[i].comp_self))) ||
            json_object_set_new(row, "base_self", json_real(d[i].base_self)) ||
            json_object_set_new(row, "comp_self", json_real(d[i].comp_self)) ||
            json_object_set_new(row, "base_total", json_real(d[i].base_total)) ||
            json_object_set_new(row, "comp_total", json_real(d[i].comp_total)) ||
            json_array_append_new(a, row)) {
            json_decref(a);
            a = NULL;
        }
    }
    free(d);
    return a;
}

/* {"flame": <pfr_render_json>, "top": [...], "chunks": N, "corrupt": N} */
static int write_flame(request *r, const pfr_tree *t, const pfr_render_opts *ro, const char *meta,
                       json_t *top, const pfr_query_stats *st)
{
    body b;
    if (!top)
        return fail(r, 500, "out of memory");
    if (body_open(r, &b)) {
        json_decref(top);
        return -1;
    }
    fputs("{\"flame\":", b.f);
    int rc = pfr_render_json(b.f, t, ro, meta);
    fputs(",\"top\":", b.f);
    if (rc == 0)
        rc = dump_json(b.f, top);
    else
        json_decref(top);
    fprintf(b.f, ",\"chunks\":%llu,\"corrupt\":%llu}", (unsigned long long)st->chunks,
            (unsigned long long)st->corrupt);
    return body_finish(r, &b, rc);
}

static int api_flame(request *r)
{
    static const char *const known[] = {"service", "type",      "label", "from",
                                        "to",      "min_width", "top",   NULL};
    double share;
    size_t rows;
    if (check_args(r, known) || parse_min_width(r, &share) || parse_top(r, &rows) ||
        prepare(r, "-1h"))
        return -1;
    char err[1024] = "", title[512], sub[1024], what[512], a[48], b[48], d[32], v[40];
    pfr_query_stats st = {0};
    pfr_tree *t = pfr_tree_new();
    int rc =
        t ? pfr_query_tree(r->store, r->plan, r->from_ns, r->to_ns, t, 0, &st, err, sizeof(err))
          : -ENOMEM;
    if (rc == 0) {
        pfr_tree_set_min_share(t, share);
        rc = pfr_tree_finish(t);
    }
    if (rc < 0) {
        pfr_tree_free(t);
        return fail_engine(r, rc, NULL, err);
    }
    const pfr_query_plan *p = r->plan;
    pfr_query_plan_describe(p, what, sizeof(what));
    snprintf(title, sizeof(title), "%s: %s", p->type, plan_service(p));
    snprintf(sub, sizeof(sub), "%s to %s (%s) · %s · total %s%s · %llu chunks",
             pfr_time_format(r->from_ns, false, a, sizeof(a)),
             pfr_time_format(r->to_ns, false, b, sizeof(b)),
             pfr_duration_format(r->to_ns - r->from_ns, d, sizeof(d)), what,
             pfr_format_value(pfr_tree_node_at(t, 0)->total[0], pfr_type_unit(p->type), false, v,
                              sizeof(v)),
             p->gauge ? " (mean)" : "", (unsigned long long)st.chunks);
    pfr_render_opts ro = {.title = title,
                          .subtitle = sub,
                          .unit = pfr_type_unit(p->type),
                          .min_width = share > 0 ? share : -1};
    char *meta = NULL;
    rc = pfr_query_meta_json(p, r->from_ns, r->to_ns, 0, 0, &meta);
    rc = rc < 0 ? fail(r, 500, "out of memory")
                : write_flame(r, t, &ro, meta, top_flame(t, rows), &st);
    free(meta);
    pfr_tree_free(t);
    return rc;
}

/* base_from/base_to as the command line: default the range of equal length just before. */
static int diff_base(request *r, int64_t *bf, int64_t *bt)
{
    const char *f = arg(r, "base_from"), *t = arg(r, "base_to");
    if (!f && !t) {
        pfr_diff_default_base(r->from_ns, r->to_ns, bf, bt);
        return 0;
    }
    if (!f)
        return fail(r, 400, "base_to needs base_from");
    if (parse_time_arg(r, "base_from", NULL, bf))
        return -1;
    if (!t)
        *bt = *bf + (r->to_ns - r->from_ns);
    else if (parse_time_arg(r, "base_to", NULL, bt))
        return -1;
    return check_range(r, "baseline", *bf, *bt);
}

static int api_diff(request *r)
{
    static const char *const known[] = {"service",   "type",    "label",     "from", "to",
                                        "base_from", "base_to", "min_width", "top",  NULL};
    double share;
    size_t rows;
    int64_t bf, bt;
    if (check_args(r, known) || parse_min_width(r, &share) || parse_top(r, &rows) ||
        prepare(r, "-1h") || diff_base(r, &bf, &bt))
        return -1;
    int64_t range[2][2] = {{bf, bt}, {r->from_ns, r->to_ns}};
    char err[1024] = "";
    pfr_query_stats st[2] = {{0}};
    pfr_tree *t = pfr_tree_new();
    int rc = t ? 0 : -ENOMEM;
    const char *what_failed = NULL;
    for (int side = 0; side < 2 && rc == 0; side++) {
        rc = pfr_query_tree(r->store, r->plan, range[side][0], range[side][1], t, side, &st[side],
                            err, sizeof(err));
        what_failed = side ? "comparison" : "baseline";
    }
    if (rc == 0) {
        pfr_tree_set_min_share(t, share);
        rc = pfr_tree_finish(t);
        what_failed = "building the flame graph";
    }
    if (rc < 0) {
        pfr_tree_free(t);
        return fail_engine(r, rc, what_failed, err);
    }
    const pfr_query_plan *p = r->plan;
    char title[512], sub[1024], what[512], a[48], b[48], c[48], d[48];
    pfr_query_plan_describe(p, what, sizeof(what));
    snprintf(title, sizeof(title), "Diff %s: %s", p->type, plan_service(p));
    snprintf(sub, sizeof(sub), "comparison %s to %s vs baseline %s to %s · %s · per second",
             pfr_time_format(r->from_ns, false, a, sizeof(a)),
             pfr_time_format(r->to_ns, false, b, sizeof(b)), pfr_time_format(bf, false, c, 48),
             pfr_time_format(bt, false, d, sizeof(d)), what);
    pfr_render_opts ro = {.title = title,
                          .subtitle = sub,
                          .unit = pfr_type_unit(p->type),
                          .diff = true,
                          .norm = {pfr_diff_norm(bf, bt), pfr_diff_norm(r->from_ns, r->to_ns)},
                          .min_width = share > 0 ? share : -1};
    pfr_query_stats all = {st[0].chunks + st[1].chunks, st[0].corrupt + st[1].corrupt};
    char *meta = NULL;
    rc = pfr_query_meta_json(p, r->from_ns, r->to_ns, bf, bt, &meta);
    rc = rc < 0 ? fail(r, 500, "out of memory")
                : write_flame(r, t, &ro, meta, top_diff(t, ro.norm, rows), &all);
    free(meta);
    pfr_tree_free(t);
    return rc;
}

/* ---- /api/labels: the sample labels (pid, comm) of a range, heaviest values first ---- */
typedef struct label_value {
    const char *key;
    char *value;
    double total;
} label_value;

static int cmp_label_value(const void *a, const void *b)
{
    const label_value *x = a, *y = b;
    int k = strcmp(x->key, y->key);
    if (k)
        return k;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return strcmp(x->value, y->value);
}

/* Add v to the label's sum in acc; key and value in their JSON form (pfr_names.h): comm and
 * friends are bytes, and the page gives the value back to select it. 0 or -ENOMEM. */
static int add_label_value(json_t *acc, const pfr_label *l, double v)
{
    char num[32];
    if (!l->str)
        snprintf(num, sizeof(num), "%lld", (long long)l->num);
    int kerr, verr;
    char *pk = pfr_name_json(l->key, &kerr), *pv = l->str ? pfr_name_json(l->str, &verr) : NULL;
    const char *key = pk ? pk : l->key, *val = pv ? pv : l->str ? l->str : num;
    int rc = kerr || (l->str && verr) ? -ENOMEM : 0;
    json_t *m = rc ? NULL : json_object_get(acc, key);
    if (!rc && !m && json_object_set_new(acc, key, m = json_object()))
        rc = -ENOMEM;
    json_t *cur = rc ? NULL : json_object_get(m, val);
    if (!rc && json_object_set_new(m, val, json_real((cur ? json_real_value(cur) : 0) + v)))
        rc = -ENOMEM;
    free(pk);
    free(pv);
    return rc;
}

/* Sum each (key, value)'s sample values, in a JSON object of objects used as a map. */
static int collect_labels(const pfr_profile *p, int ti, json_t *acc)
{
    size_t n = pfr_profile_num_samples(p);
    for (size_t i = 0; i < n; i++) {
        const pfr_label *l;
        size_t nl = pfr_profile_sample_labels(p, i, &l);
        double v = (double)pfr_profile_sample_values(p, i)[ti];
        for (size_t k = 0; k < nl; k++)
            if (add_label_value(acc, &l[k], v) < 0)
                return -ENOMEM;
    }
    return 0;
}

/* {"pid": [{"value": "42", "total": 123}, ...], "comm": [...]}, at most max values per key. */
static json_t *labels_doc(json_t *acc, size_t max)
{
    json_t *doc = json_object();
    const char *key;
    json_t *m;
    json_object_foreach(acc, key, m)
    {
        size_t n = json_object_size(m), i = 0;
        label_value *v = calloc(n ? n : 1, sizeof(*v));
        json_t *arr = json_array();
        const char *val;
        json_t *tot;
        if (!v || !arr || !doc) {
            free(v);
            json_decref(arr);
            json_decref(doc);
            return NULL;
        }
        json_object_foreach(m, val, tot) v[i++] =
            (label_value){key, (char *)val, json_real_value(tot)};
        qsort(v, n, sizeof(*v), cmp_label_value);
        for (i = 0; i < n && i < max; i++)
            json_array_append_new(
                arr, json_pack("{s:s, s:f}", "value", v[i].value, "total", v[i].total));
        free(v);
        json_object_set_new(doc, key, arr);
    }
    return doc;
}

static int api_labels(request *r)
{
    static const char *const known[] = {"service", "type", "label", "from", "to", "values", NULL};
    const char *s = arg(r, "values");
    long max = 50;
    if (check_args(r, known))
        return -1;
    if (s) {
        char *end;
        max = strtol(s, &end, 10);
        if (end == s || *end || max < 1 || max > 10000)
            return fail(r, 400, "bad values \"%s\": expected a count from 1 to 10000", s);
    }
    if (prepare(r, "-1h"))
        return -1;
    char err[1024] = "";
    pfr_profile *p = NULL;
    pfr_query_stats st = {0};
    int rc = pfr_query_profile(r->store, r->plan, r->from_ns, r->to_ns, false, &p, &st, err,
                               sizeof(err));
    if (rc < 0)
        return fail_engine(r, rc, NULL, err);
    json_t *acc = json_object(), *doc = NULL;
    int ti = pfr_profile_find_sample_type(p, r->plan->type);
    rc = acc ? 0 : -ENOMEM;
    if (rc == 0 && ti >= 0)
        rc = collect_labels(p, ti, acc);
    if (rc == 0 && !(doc = labels_doc(acc, (size_t)max)))
        rc = -ENOMEM;
    json_decref(acc);
    pfr_profile_free(p);
    if (rc < 0) {
        json_decref(doc);
        return fail(r, 500, "out of memory");
    }
    body b;
    if (body_open(r, &b)) {
        json_decref(doc);
        return -1;
    }
    rc = dump_json(b.f, json_pack("{s:o, s:I, s:I, s:I, s:o}", "type", pfr_json_text(r->plan->type),
                                  "from_ns", (json_int_t)r->from_ns, "to_ns", (json_int_t)r->to_ns,
                                  "chunks", (json_int_t)st.chunks, "sample_labels", doc));
    return body_finish(r, &b, rc);
}

/* ---- routing ---- */
int pfr_serve_api_call(const pfr_serve_api *api, const char *path, const pfr_kv *args, size_t nargs,
                       int64_t now_ns, pfr_serve_response *out)
{
    static const struct {
        const char *path;
        int (*fn)(request *);
    } routes[] = {{"/api/ls", api_ls},
                  {"/api/timeline", api_timeline},
                  {"/api/flame", api_flame},
                  {"/api/diff", api_diff},
                  {"/api/labels", api_labels}};
    memset(out, 0, sizeof(*out));
    request r = {.api = api, .args = args, .nargs = nargs, .now_ns = now_ns, .out = out};
    size_t i = 0, bad = 0;
    while (bad < nargs && valid_utf8(args[bad].key) && valid_utf8(args[bad].value))
        bad++;
    while (i < sizeof(routes) / sizeof(routes[0]) && strcmp(routes[i].path, path) != 0)
        i++;
    if (bad < nargs)
        fail(&r, 400, "argument \"%s\" is not valid UTF-8", args[bad].key);
    else if (i == sizeof(routes) / sizeof(routes[0]))
        fail(&r, 404,
             "no such endpoint %s (endpoints: /api/ls, /api/timeline, /api/flame, "
             "/api/diff, /api/labels)",
             path);
    else
        routes[i].fn(&r);
    request_free(&r);
    return out->body ? 0 : -ENOMEM;
}
