/* Query planning (type, services, label kinds) and running a plan into a tree or a profile. */
#include "pfr_names.h"
#include "pfr_query.h"
#include "pfr_time.h"
#include "render_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

bool pfr_query_type_is_gauge(const char *type)
{
    return type && (strstr(type, "inuse") || strstr(type, "goroutine"));
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- a small set of strings, kept sorted, for types, services and label keys ---- */
typedef struct strset {
    char **v;
    size_t n, cap;
} strset;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool strset_has(const strset *s, const char *x)
{
    return x && s->n && bsearch(&x, s->v, s->n, sizeof(char *), cmp_str);
}

static int strset_add(strset *s, const char *x)
{
    if (strset_has(s, x))
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    char *c = strdup(x);
    if (!c)
        return -ENOMEM;
    size_t i = s->n;
    while (i > 0 && strcmp(s->v[i - 1], c) > 0) {
        s->v[i] = s->v[i - 1];
        i--;
    }
    s->v[i] = c;
    s->n++;
    return 0;
}

static void strset_free(strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* A name from the ring or the user as messages show it: control characters escaped. */
static const char *shown(const char *name, char *buf, size_t len)
{
    return pfr_text_escape(name ? name : "", 0, buf, len);
}

/* "a, b, c" (at most max names, quoted when needed) into buf. */
static void strset_join(const strset *s, char *buf, size_t len, size_t max)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->n && i < max && used < len; i++) {
        char one[160];
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                                 pfr_text_escape(s->v[i], PFR_TEXT_QUOTE, one, sizeof(one)));
    }
    if (s->n > max && used < len)
        snprintf(buf + used, len - used, ", ... (%zu in all)", s->n);
    if (!s->n)
        snprintf(buf, len, "(none)");
}

/* ---- planning ---- */
typedef struct plan_ctx {
    const pfr_query *q;
    strset profile_keys; /* label keys of the query's service's streams */
    strset all_services;
    /* filled in the second pass */
    const pfr_kv *plabels;
    size_t nplabels;
    strset types, services;
    int64_t first_ns, last_ns;
    const char *want_type;
    int pass;
} plan_ctx;

static bool stream_has_labels(const pfr_stream_info *si, const pfr_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < si->nlabels && !found; j++)
            found = strcmp(si->labels[j].key, kv[i].key) == 0 &&
                    strcmp(si->labels[j].value, kv[i].value) == 0;
        if (!found)
            return false;
    }
    return true;
}

static bool stream_has_type(const pfr_stream_info *si, const char *type)
{
    for (size_t i = 0; i < si->ntypes; i++)
        if (strcmp(si->types[i], type) == 0)
            return true;
    return false;
}

static int plan_stream_cb(const pfr_stream_info *si, void *vctx)
{
    plan_ctx *c = vctx;
    bool service_ok = !c->q->service || strcmp(c->q->service, si->service) == 0;
    if (c->pass == 0) {
        int rc = strset_add(&c->all_services, si->service);
        for (size_t i = 0; i < si->nlabels && rc == 0 && service_ok; i++)
            rc = strset_add(&c->profile_keys, si->labels[i].key);
        return rc;
    }
    if (!service_ok || !stream_has_labels(si, c->plabels, c->nplabels))
        return 0;
    if (!c->want_type) {
        for (size_t i = 0; i < si->ntypes; i++)
            if (strset_add(&c->types, si->types[i]) < 0)
                return -ENOMEM;
        return 0;
    }
    if (!stream_has_type(si, c->want_type))
        return 0;
    if (strset_add(&c->services, si->service) < 0)
        return -ENOMEM;
    if (!c->first_ns || si->first_ns < c->first_ns)
        c->first_ns = si->first_ns;
    if (si->last_ns > c->last_ns)
        c->last_ns = si->last_ns;
    return 0;
}

static int copy_kv(pfr_kv **dst, size_t *n, const pfr_kv *src)
{
    pfr_kv *v = realloc(*dst, (*n + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    *dst = v;
    v[*n].key = strdup(src->key);
    v[*n].value = strdup(src->value);
    (*n)++;
    return v[*n - 1].key && v[*n - 1].value ? 0 : -ENOMEM;
}

static void free_kvs(pfr_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)kv[i].key);
        free((char *)kv[i].value);
    }
    free(kv);
}

void pfr_query_plan_free(pfr_query_plan *p)
{
    if (!p)
        return;
    free(p->type);
    free(p->service);
    for (size_t i = 0; i < p->nservices; i++)
        free(p->services[i]);
    free(p->services);
    free_kvs(p->profile_labels, p->nprofile_labels);
    free_kvs(p->sample_labels, p->nsample_labels);
    free(p);
}

static int plan_labels(pfr_query_plan *p, const pfr_query *q, const strset *profile_keys)
{
    for (size_t i = 0; i < q->nlabels; i++) {
        int rc = strset_has(profile_keys, q->labels[i].key)
                     ? copy_kv(&p->profile_labels, &p->nprofile_labels, &q->labels[i])
                     : copy_kv(&p->sample_labels, &p->nsample_labels, &q->labels[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int choose_type(plan_ctx *c, const pfr_query *q, char *err, size_t errlen)
{
    char list[512], type[256], svc[256];
    strset_join(&c->types, list, sizeof(list), 12);
    shown(q->type, type, sizeof(type));
    shown(q->service, svc, sizeof(svc));
    if (q->type) {
        if (strset_has(&c->types, q->type)) {
            c->want_type = q->type;
            return 0;
        }
        set_err(err, errlen, "no profiles of type %s%s%s in the ring; types there: %s", type,
                q->service ? " for service " : "", svc, list);
        return -ENOENT;
    }
    if (strset_has(&c->types, PFR_QUERY_DEFAULT_TYPE))
        c->want_type = PFR_QUERY_DEFAULT_TYPE;
    else if (c->types.n == 1)
        c->want_type = c->types.v[0];
    else if (c->types.n == 0) {
        set_err(err, errlen, "no profiles%s%s match the labels given", q->service ? " of " : "",
                svc);
        return -ENOENT;
    } else {
        set_err(err, errlen, "several profile types; choose one with --type: %s", list);
        return -EINVAL;
    }
    return 0;
}

/* ---- names as the query gives them: as pfr prints them (pfr_names.h) ---- */
static int read_name(const char *in, const char **out, char **owned)
{
    int err = 0;
    *owned = in ? pfr_name_parse(in, PFR_NAME_JSON, &err) : NULL;
    *out = *owned ? *owned : in;
    return err;
}

void pfr_query_names_free(pfr_query_names *r)
{
    for (size_t i = 0; r->owned && i < 2 + 2 * r->q.nlabels; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->labels);
    memset(r, 0, sizeof(*r));
}

int pfr_query_read_names(const pfr_query *in, pfr_query_names *r)
{
    *r = (pfr_query_names){.q = *in};
    r->owned = calloc(2 + 2 * in->nlabels, sizeof(*r->owned));
    r->labels = calloc(in->nlabels ? in->nlabels : 1, sizeof(*r->labels));
    if (!r->owned || !r->labels) {
        pfr_query_names_free(r);
        return -ENOMEM;
    }
    r->q.labels = r->labels;
    int rc = read_name(in->service, &r->q.service, &r->owned[0]);
    rc = rc ? rc : read_name(in->type, &r->q.type, &r->owned[1]);
    for (size_t i = 0; i < in->nlabels && rc == 0; i++) {
        rc = read_name(in->labels[i].key, &r->labels[i].key, &r->owned[2 + 2 * i]);
        rc = rc ? rc : read_name(in->labels[i].value, &r->labels[i].value, &r->owned[3 + 2 * i]);
    }
    if (rc)
        pfr_query_names_free(r);
    return rc;
}

int pfr_query_plan_new(pfr_store *s, const pfr_query *given, pfr_query_plan **out, char *err,
                       size_t errlen)
{
    pfr_query_names names = {.q = {0}};
    const pfr_query *q = &names.q;
    plan_ctx c = {.q = q};
    pfr_query_plan *p = calloc(1, sizeof(*p));
    int rc = p ? pfr_query_read_names(given, &names) : -ENOMEM;
    for (size_t i = 0; i < q->nlabels && rc == 0; i++)
        if (!q->labels[i].key || !q->labels[i].key[0] || !q->labels[i].value) {
            set_err(err, errlen, "bad label filter: expected key=value");
            rc = -EINVAL;
        }
    if (rc == 0 && (rc = pfr_store_streams(s, plan_stream_cb, &c)) < 0)
        set_err(err, errlen, "reading the ring's streams: %s", strerror(-rc));
    if (rc == 0 && c.all_services.n == 0) {
        set_err(err, errlen, "the ring is empty: no profiles recorded yet");
        rc = -ENOENT;
    }
    if (rc == 0 && q->service && !strset_has(&c.all_services, q->service)) {
        char list[512], svc[256];
        strset_join(&c.all_services, list, sizeof(list), 20);
        set_err(err, errlen, "no service \"%s\" in the ring; services: %s",
                shown(q->service, svc, sizeof(svc)), list);
        rc = -ENOENT;
    }
    if (rc == 0)
        rc = plan_labels(p, q, &c.profile_keys);
    if (rc == 0) {
        c.pass = 1;
        c.plabels = p->profile_labels;
        c.nplabels = p->nprofile_labels;
        rc = pfr_store_streams(s, plan_stream_cb, &c);
    }
    if (rc == 0)
        rc = choose_type(&c, q, err, errlen);
    if (rc == 0 && (rc = pfr_store_streams(s, plan_stream_cb, &c)) == 0) {
        p->type = strdup(c.want_type);
        p->service = q->service ? strdup(q->service) : NULL;
        p->gauge = pfr_query_type_is_gauge(c.want_type);
        p->services = c.services.v;
        p->nservices = c.services.n;
        c.services.v = NULL;
        c.services.n = 0;
        p->first_ns = c.first_ns;
        p->last_ns = c.last_ns;
        if (!p->type || (q->service && !p->service))
            rc = -ENOMEM;
    }
    strset_free(&c.profile_keys);
    strset_free(&c.all_services);
    strset_free(&c.types);
    strset_free(&c.services);
    pfr_query_names_free(&names);
    if (rc < 0) {
        pfr_query_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void pfr_query_plan_describe(const pfr_query_plan *p, char *buf, size_t len)
{
    size_t used = 0;
    if (!len)
        return;
    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (used < len)                                                                            \
            used += (size_t)snprintf(buf + used, len - used, __VA_ARGS__);                         \
    } while (0)
    char one[160];
#define NAME(s) ADD("%s", shown(s, one, sizeof(one)))
    if (p->service || p->nservices == 1) {
        ADD("service ");
        NAME(p->service ? p->service : p->services[0]);
    } else {
        ADD("%zu services", p->nservices);
    }
    ADD(", type ");
    NAME(p->type);
    for (int side = 0; side < 2; side++) {
        const pfr_kv *kv = side ? p->sample_labels : p->profile_labels;
        size_t n = side ? p->nsample_labels : p->nprofile_labels;
        for (size_t i = 0; i < n; i++) {
            ADD(", ");
            NAME(kv[i].key);
            ADD("=");
            NAME(kv[i].value);
        }
    }
#undef NAME
#undef ADD
}

static json_t *kv_object(const pfr_kv *kv, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        pfr_json_set_text_key(o, kv[i].key, pfr_json_text(kv[i].value));
    return o;
}

int pfr_query_meta_json(const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                        int64_t base_from_ns, int64_t base_to_ns, char **out)
{
    char a[48], b[48];
    json_t *services = json_array();
    for (size_t i = 0; services && i < p->nservices; i++)
        json_array_append_new(services, pfr_json_text(p->services[i]));
    json_t *m = json_pack("{s:o?, s:o, s:o, s:b, s:o, s:o, s:s, s:s, s:I, s:I}", "service",
                          p->service ? pfr_json_text(p->service) : NULL, "services", services,
                          "type", pfr_json_text(p->type), "gauge", p->gauge, "profile_labels",
                          kv_object(p->profile_labels, p->nprofile_labels), "sample_labels",
                          kv_object(p->sample_labels, p->nsample_labels), "from",
                          pfr_time_format_rfc3339(from_ns, a, sizeof(a)), "to",
                          pfr_time_format_rfc3339(to_ns, b, sizeof(b)), "from_ns",
                          (json_int_t)from_ns, "to_ns", (json_int_t)to_ns);
    if (m && (base_from_ns || base_to_ns)) {
        json_object_set_new(m, "base_from",
                            json_string(pfr_time_format_rfc3339(base_from_ns, a, sizeof(a))));
        json_object_set_new(m, "base_to",
                            json_string(pfr_time_format_rfc3339(base_to_ns, b, sizeof(b))));
        json_object_set_new(m, "base_from_ns", json_integer(base_from_ns));
        json_object_set_new(m, "base_to_ns", json_integer(base_to_ns));
    }
    *out = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    return *out ? 0 : -ENOMEM;
}

/* ---- running a plan ---- */
static void make_filter(const pfr_query_plan *p, const char *service, int64_t from_ns,
                        int64_t to_ns, pfr_store_filter *f)
{
    memset(f, 0, sizeof(*f));
    f->from_ns = from_ns;
    f->to_ns = to_ns;
    f->service = service;
    f->type = p->type;
    f->labels = p->profile_labels;
    f->nlabels = p->nprofile_labels;
    f->sample_labels = p->sample_labels;
    f->nsample_labels = p->nsample_labels;
}

static void no_data(const pfr_query_plan *p, int64_t from_ns, int64_t to_ns, char *err,
                    size_t errlen)
{
    char a[48], b[48], c[48], d[48], what[512];
    pfr_query_plan_describe(p, what, sizeof(what));
    set_err(err, errlen, "no data from %s to %s (%s); the matching profiles cover %s to %s",
            pfr_time_format(from_ns, false, a, sizeof(a)),
            pfr_time_format(to_ns, false, b, sizeof(b)), what,
            pfr_time_format(p->first_ns, false, c, sizeof(c)),
            pfr_time_format(p->last_ns, false, d, sizeof(d)));
}

typedef struct stream_count {
    int64_t stream;
    uint64_t chunks;
    double ns; /* time its chunks cover within the range */
} stream_count;

typedef struct tree_scan_ctx {
    pfr_tree *t;
    int side;
    const char *type;
    bool prefix;
    stream_count *counts; /* gauges: chunks and time per stream, sorted by stream */
    int64_t from_ns, to_ns;
    size_t ncounts, cap;
    int pass; /* gauges: 0 counts, 1 adds */
} tree_scan_ctx;

static int cmp_stream(const void *a, const void *b)
{
    const stream_count *x = a, *y = b;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

static stream_count *find_count(tree_scan_ctx *c, int64_t stream)
{
    stream_count key = {.stream = stream};
    return c->ncounts ? bsearch(&key, c->counts, c->ncounts, sizeof(key), cmp_stream) : NULL;
}

/* The time of chunk m within the range: a gauge's chunk weighs by it, so chunks of different
 * lengths (roll-ups of the ring's tiers beside chunks as recorded) give the time average. */
static double covered(const tree_scan_ctx *c, const pfr_chunk_meta *m)
{
    int64_t a = m->start_ns > c->from_ns ? m->start_ns : c->from_ns;
    int64_t e = c->to_ns && m->end_ns > c->to_ns ? c->to_ns : m->end_ns;
    return e > a ? (double)(e - a) : 0;
}

static int tree_scan_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *vctx)
{
    tree_scan_ctx *c = vctx;
    if (c->pass == 0) {
        stream_count *sc = find_count(c, m->stream_id);
        if (sc) {
            sc->chunks++;
            sc->ns += covered(c, m);
            return 0;
        }
        if (c->ncounts == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 16;
            stream_count *v = realloc(c->counts, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            c->counts = v;
            c->cap = cap;
        }
        c->counts[c->ncounts++] = (stream_count){m->stream_id, 1, covered(c, m)};
        qsort(c->counts, c->ncounts, sizeof(*c->counts), cmp_stream);
        return 0;
    }
    int ti = pfr_profile_find_sample_type(p, c->type);
    if (ti < 0)
        return 0;
    double scale = 1;
    if (c->counts) {
        stream_count *sc = find_count(c, m->stream_id);
        scale = sc && sc->ns > 0   ? covered(c, m) / sc->ns
                : sc && sc->chunks ? 1.0 / (double)sc->chunks
                                   : 1;
    }
    return pfr_tree_add_profile(c->t, c->side, p, (size_t)ti, scale, c->prefix ? m->service : NULL);
}

/* Chunk by chunk: for gauges (each stream averaged over its chunks) and as the fallback when the
 * store cannot merge the chunks into one profile. */
static int tree_by_scan(pfr_store *s, const pfr_query_plan *p, const pfr_store_filter *f,
                        pfr_tree *t, int side, bool prefix, pfr_query_stats *st)
{
    tree_scan_ctx c = {.t = t,
                       .side = side,
                       .type = p->type,
                       .prefix = prefix,
                       .from_ns = f->from_ns,
                       .to_ns = f->to_ns};
    pfr_scan_stats ss = {0};
    int rc = 0;
    if (p->gauge) {
        rc = pfr_store_scan(s, f, PFR_SCAN_META_ONLY, tree_scan_cb, &c, NULL);
        c.pass = 1;
    } else {
        c.pass = 1;
    }
    if (rc == 0)
        rc = pfr_store_scan(s, f, 0, tree_scan_cb, &c, &ss);
    free(c.counts);
    st->chunks += ss.chunks;
    st->corrupt += ss.corrupt;
    return rc < 0 ? rc : ss.chunks ? 0 : -ENOENT;
}

static int tree_by_merge(pfr_store *s, const pfr_query_plan *p, const pfr_store_filter *f,
                         pfr_tree *t, int side, bool prefix, pfr_query_stats *st)
{
    pfr_profile *m = NULL;
    pfr_scan_stats ss = {0};
    int rc = pfr_store_merge(s, f, PFR_MERGE_DROP_LABELS, &m, &ss);
    st->corrupt += ss.corrupt;
    if (rc == -EINVAL) /* chunks whose sample types differ: take them one by one */
        return tree_by_scan(s, p, f, t, side, prefix, st);
    if (rc < 0)
        return rc;
    st->chunks += ss.chunks;
    int ti = pfr_profile_find_sample_type(m, p->type);
    if (ti >= 0)
        rc = pfr_tree_add_profile(t, side, m, (size_t)ti, 1.0, prefix ? f->service : NULL);
    pfr_profile_free(m);
    return rc;
}

int pfr_query_tree(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                   pfr_tree *t, int side, pfr_query_stats *st, char *err, size_t errlen)
{
    pfr_query_stats local = {0};
    if (!st)
        st = &local;
    if (to_ns <= from_ns) {
        set_err(err, errlen, "empty range: the end is not after the start");
        return -EINVAL;
    }
    bool prefix = p->nservices > 1;
    bool any = false;
    for (size_t i = 0; i < p->nservices; i++) {
        pfr_store_filter f;
        make_filter(p, p->services[i], from_ns, to_ns, &f);
        int rc = p->gauge ? tree_by_scan(s, p, &f, t, side, prefix, st)
                          : tree_by_merge(s, p, &f, t, side, prefix, st);
        if (rc == -ENOENT)
            continue;
        if (rc < 0) {
            set_err(err, errlen, "reading the ring: %s", strerror(-rc));
            return rc;
        }
        any = true;
    }
    if (!any) {
        no_data(p, from_ns, to_ns, err, errlen);
        return -ENOENT;
    }
    return 0;
}

int pfr_query_profile(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                      bool drop_labels, pfr_profile **out, pfr_query_stats *st, char *err,
                      size_t errlen)
{
    pfr_query_stats local = {0};
    if (!st)
        st = &local;
    if (to_ns <= from_ns) {
        set_err(err, errlen, "empty range: the end is not after the start");
        return -EINVAL;
    }
    pfr_profile *acc = NULL;
    int rc = 0;
    for (size_t i = 0; i < p->nservices && rc == 0; i++) {
        pfr_store_filter f;
        pfr_scan_stats ss = {0};
        pfr_profile *m = NULL;
        make_filter(p, p->services[i], from_ns, to_ns, &f);
        rc = pfr_store_merge(s, &f, drop_labels ? PFR_MERGE_DROP_LABELS : 0, &m, &ss);
        st->chunks += ss.chunks;
        st->corrupt += ss.corrupt;
        if (rc == -ENOENT) {
            rc = 0;
            continue;
        }
        if (rc < 0) {
            char svc[256];
            set_err(err, errlen, "merging the profiles of %s: %s",
                    shown(p->services[i], svc, sizeof(svc)),
                    rc == -EINVAL ? "their sample types differ; choose one with --service"
                                  : strerror(-rc));
            break;
        }
        if (!acc) {
            acc = m;
            continue;
        }
        rc = pfr_profile_merge(acc, m, drop_labels ? PFR_MERGE_DROP_LABELS : 0);
        pfr_profile_free(m);
        if (rc < 0)
            set_err(err, errlen, "merging services: %s",
                    rc == -EINVAL ? "their sample types differ; choose one with --service"
                                  : strerror(-rc));
    }
    if (rc == 0 && !acc) {
        no_data(p, from_ns, to_ns, err, errlen);
        rc = -ENOENT;
    }
    if (rc < 0) {
        pfr_profile_free(acc);
        return rc;
    }
    *out = acc;
    return 0;
}
