/* The registry and the text exposition format. */
#include "pfr_metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"
#include "pfr_map.h"
#include "pfr_metric_rows.h"

#define NBUCKETS 256u /* hash chains per family */

struct pfr_metric {
    pfr_metric_family *family;
    char **values; /* label values, family->nlabels of them */
    uint64_t hash;
    double value;
    pfr_metric *chain;       /* next in the hash bucket */
    pfr_metric *prev, *next; /* insertion order, for stable output */
};

struct pfr_metric_family {
    pfr_metrics *m;
    char *name, *help;
    enum pfr_metric_type type;
    char **labels;
    size_t nlabels;
    pfr_metric *buckets[NBUCKETS];
    pfr_metric *first, *last;
    size_t nseries;
    pfr_metric_family *next;
};

struct pfr_metrics {
    pthread_mutex_t lock;
    size_t max_series;
    pfr_metric_family *first, *last;
    pfr_metric_family *dropped; /* pfr_metrics_series_dropped_total{family} */
    pfr_metric_family *err_info, *err_time, *err_count;
    /* a row's family by the row's address (rows are static tables): each interval publishes
     * hundreds of rows, and finding each by name walked the list of families with strcmp */
    pfr_map by_row;
};

static bool valid_name(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon && c == ':') || (p > s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static char **dup_strv(const char *const *v, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof(*out));
    for (size_t i = 0; out && i < n; i++) {
        out[i] = strdup(v[i] ? v[i] : "");
        if (!out[i]) {
            free_strv(out, i);
            return NULL;
        }
    }
    return out;
}

static void series_free(pfr_metric *s)
{
    free_strv(s->values, s->family->nlabels);
    free(s);
}

static void family_free(pfr_metric_family *f)
{
    for (pfr_metric *s = f->first, *n; s; s = n) {
        n = s->next;
        series_free(s);
    }
    free(f->name);
    free(f->help);
    free_strv(f->labels, f->nlabels);
    free(f);
}

static int family_locked(pfr_metrics *m, const char *name, const char *help,
                         enum pfr_metric_type type, const char *const *labels, size_t nlabels,
                         pfr_metric_family **out)
{
    if (!valid_name(name, true) || (nlabels && !labels))
        return -EINVAL;
    for (size_t i = 0; i < nlabels; i++)
        if (!valid_name(labels[i], false) || strncmp(labels[i], "__", 2) == 0)
            return -EINVAL;
    for (pfr_metric_family *f = m->first; f; f = f->next) {
        if (strcmp(f->name, name) != 0)
            continue;
        /* one name, one family: a second description of it is a mistake */
        if (f->type != type || f->nlabels != nlabels || strcmp(f->help, help ? help : "") != 0)
            return -EINVAL;
        for (size_t i = 0; i < nlabels; i++)
            if (strcmp(f->labels[i], labels[i]) != 0)
                return -EINVAL;
        *out = f;
        return 0;
    }
    pfr_metric_family *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->m = m;
    f->type = type;
    f->nlabels = nlabels;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    f->labels = dup_strv(labels, nlabels);
    if (!f->name || !f->help || !f->labels) {
        family_free(f);
        return -ENOMEM;
    }
    if (m->last)
        m->last->next = f;
    else
        m->first = f;
    m->last = f;
    *out = f;
    return 0;
}

/* The registry's own families, in the order pfr_metrics_new registers them. */
static const pfr_metric_row registry_rows[] = {
    {"pfr_metrics_series_dropped_total", PFR_METRIC_COUNTER,
     "Series not created because their family reached its bound", .labels = {"family"},
     .flags = PFR_METRIC_OWN, .doc_values = "the family"},
    {"pfr_errors_total", PFR_METRIC_COUNTER, "Errors reported, by source", .labels = {"source"},
     .flags = PFR_METRIC_OWN, .doc_values = "cpu, goheap, scrape, store, identity"},
    {"pfr_last_error_info", PFR_METRIC_GAUGE, "The last error of each source (value 1)",
     .labels = {"source", "message"}, .flags = PFR_METRIC_OWN,
     .doc_values = "the source; its newest error"},
    {"pfr_last_error_timestamp_seconds", PFR_METRIC_GAUGE,
     "When the last error of each source happened", .labels = {"source"}, .flags = PFR_METRIC_OWN,
     .doc_values = "the source"},
};
const pfr_metric_table pfr_metrics_registry_table =
    PFR_METRIC_TABLE("Errors and the registry", registry_rows);

static const pfr_metric_row go_alloc_rows[] = {
    {PFR_METRIC_GO_ALLOC_BYTES, PFR_METRIC_COUNTER,
     "Bytes allocated by a Go process since it started (estimated from the runtime's sampled "
     "heap profile)",
     .labels = {"service", "container_id", "pid", "exe"}, .flags = PFR_METRIC_OWN,
     .doc_values = "each Go process"},
    {PFR_METRIC_GO_ALLOC_OBJECTS, PFR_METRIC_COUNTER,
     "Objects allocated by a Go process since it started (estimated from the runtime's sampled "
     "heap profile)",
     .labels = {"service", "container_id", "pid", "exe"}, .flags = PFR_METRIC_OWN,
     .doc_values = "each Go process"},
};
const pfr_metric_table pfr_metrics_go_alloc_table =
    PFR_METRIC_TABLE("Go allocations (per Go process)", go_alloc_rows);

static int row_family_locked(pfr_metrics *m, const pfr_metric_row *r, pfr_metric_family **out)
{
    uint64_t *known = pfr_map_get(&m->by_row, (uint64_t)(uintptr_t)r);
    if (known) {
        *out = (pfr_metric_family *)(uintptr_t)*known;
        return 0;
    }
    int rc = family_locked(m, r->name, r->help, r->type, r->labels, pfr_metric_row_nlabels(r), out);
    /* (not remembered for want of memory: found by name again next time) */
    if (rc == 0)
        pfr_map_put(&m->by_row, (uint64_t)(uintptr_t)r, (uint64_t)(uintptr_t)*out);
    return rc;
}

int pfr_metrics_row_family(pfr_metrics *m, const pfr_metric_row *r, pfr_metric_family **out)
{
    pthread_mutex_lock(&m->lock);
    int rc = row_family_locked(m, r, out);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int pfr_metrics_new(size_t max_series, pfr_metrics **out)
{
    pfr_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    m->max_series = max_series ? max_series : 10000;
    pfr_metric_family **own[] = {&m->dropped, &m->err_count, &m->err_info, &m->err_time};
    int rc = 0;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]) && rc == 0; i++)
        rc = row_family_locked(m, &registry_rows[i], own[i]);
    if (rc < 0) {
        pfr_metrics_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void pfr_metrics_free(pfr_metrics *m)
{
    if (!m)
        return;
    for (pfr_metric_family *f = m->first, *n; f; f = n) {
        n = f->next;
        family_free(f);
    }
    pfr_map_free(&m->by_row);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int pfr_metrics_family(pfr_metrics *m, const char *name, const char *help,
                       enum pfr_metric_type type, const char *const *label_names, size_t nlabels,
                       pfr_metric_family **out)
{
    pthread_mutex_lock(&m->lock);
    int rc = family_locked(m, name, help, type, label_names, nlabels, out);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static uint64_t labels_hash(const char *const *v, size_t n)
{
    uint64_t h = PFR_HASH_FNV_OFFSET;
    for (size_t i = 0; i < n; i++) {
        h = pfr_hash_fnv1a_str(h, v[i] ? v[i] : "");
        h = pfr_hash_fnv1a(h, "\xff", 1); /* separator: ("a","bc") != ("ab","c") */
    }
    return h;
}

static pfr_metric *find_locked(pfr_metric_family *f, const char *const *v, uint64_t h,
                               pfr_metric ***link)
{
    pfr_metric **pp = &f->buckets[h % NBUCKETS];
    for (; *pp; pp = &(*pp)->chain) {
        pfr_metric *s = *pp;
        if (s->hash != h)
            continue;
        size_t i = 0;
        while (i < f->nlabels && strcmp(s->values[i], v[i] ? v[i] : "") == 0)
            i++;
        if (i == f->nlabels)
            break;
    }
    if (link)
        *link = pp;
    return *pp;
}

static int series_locked(pfr_metric_family *f, const char *const *v, pfr_metric **out);

static void count_dropped(pfr_metric_family *f)
{
    pfr_metrics *m = f->m;
    if (f == m->dropped)
        return;
    const char *lv[] = {f->name};
    pfr_metric *d;
    if (series_locked(m->dropped, lv, &d) == 0)
        d->value += 1;
}

static int series_locked(pfr_metric_family *f, const char *const *v, pfr_metric **out)
{
    if (f->nlabels && !v)
        return -EINVAL;
    uint64_t h = labels_hash(v, f->nlabels);
    pfr_metric *s = find_locked(f, v, h, NULL);
    if (s) {
        *out = s;
        return 0;
    }
    if (f->nseries >= f->m->max_series) {
        count_dropped(f);
        return -ENOSPC;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->family = f;
    s->hash = h;
    s->values = dup_strv(v, f->nlabels);
    if (!s->values) {
        free(s);
        return -ENOMEM;
    }
    s->chain = f->buckets[h % NBUCKETS];
    f->buckets[h % NBUCKETS] = s;
    s->prev = f->last;
    if (f->last)
        f->last->next = s;
    else
        f->first = s;
    f->last = s;
    f->nseries++;
    *out = s;
    return 0;
}

int pfr_metrics_series(pfr_metric_family *f, const char *const *label_values, pfr_metric **out)
{
    pthread_mutex_lock(&f->m->lock);
    int rc = series_locked(f, label_values, out);
    pthread_mutex_unlock(&f->m->lock);
    return rc;
}

static void add_locked(pfr_metric *s, double v)
{
    if (s->family->type == PFR_METRIC_COUNTER && !(v >= 0))
        return; /* a counter never goes down; NaN fails the test too */
    s->value += v;
}

void pfr_metric_add(pfr_metric *s, double v)
{
    pthread_mutex_lock(&s->family->m->lock);
    add_locked(s, v);
    pthread_mutex_unlock(&s->family->m->lock);
}

void pfr_metric_set(pfr_metric *s, double v)
{
    pthread_mutex_lock(&s->family->m->lock);
    s->value = v;
    pthread_mutex_unlock(&s->family->m->lock);
}

double pfr_metric_value(pfr_metric *s)
{
    pthread_mutex_lock(&s->family->m->lock);
    double v = s->value;
    pthread_mutex_unlock(&s->family->m->lock);
    return v;
}

static int update(pfr_metric_family *f, const char *const *lv, double v, bool set)
{
    pthread_mutex_lock(&f->m->lock);
    pfr_metric *s;
    int rc = series_locked(f, lv, &s);
    if (rc == 0) {
        if (set)
            s->value = v;
        else
            add_locked(s, v);
    }
    pthread_mutex_unlock(&f->m->lock);
    return rc;
}

int pfr_metrics_add(pfr_metric_family *f, const char *const *label_values, double v)
{
    return update(f, label_values, v, false);
}

int pfr_metrics_set(pfr_metric_family *f, const char *const *label_values, double v)
{
    return update(f, label_values, v, true);
}

static void unlink_locked(pfr_metric_family *f, pfr_metric *s)
{
    pfr_metric **pp = &f->buckets[s->hash % NBUCKETS];
    while (*pp != s)
        pp = &(*pp)->chain;
    *pp = s->chain;
    if (s->prev)
        s->prev->next = s->next;
    else
        f->first = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        f->last = s->prev;
    f->nseries--;
    series_free(s);
}

int pfr_metrics_remove(pfr_metric_family *f, const char *const *label_values)
{
    pthread_mutex_lock(&f->m->lock);
    pfr_metric *s = find_locked(f, label_values, labels_hash(label_values, f->nlabels), NULL);
    if (s)
        unlink_locked(f, s);
    pthread_mutex_unlock(&f->m->lock);
    return s ? 0 : -ENOENT;
}

int pfr_metrics_remove_matching(pfr_metric_family *f, const char *label, const char *value)
{
    size_t k = 0;
    while (k < f->nlabels && strcmp(f->labels[k], label) != 0)
        k++;
    if (k == f->nlabels)
        return -EINVAL;
    int n = 0;
    pthread_mutex_lock(&f->m->lock);
    for (pfr_metric *s = f->first, *next; s; s = next) {
        next = s->next;
        if (strcmp(s->values[k], value) == 0) {
            unlink_locked(f, s);
            n++;
        }
    }
    pthread_mutex_unlock(&f->m->lock);
    return n;
}

size_t pfr_metrics_num_series(pfr_metric_family *f)
{
    pthread_mutex_lock(&f->m->lock);
    size_t n = f->nseries;
    pthread_mutex_unlock(&f->m->lock);
    return n;
}

int pfr_metrics_set_last_error(pfr_metrics *m, const char *source, const char *message,
                               double unix_time)
{
    if (!source)
        return -EINVAL;
    const char *src[] = {source};
    const char *lv[] = {source, message ? message : ""};
    pfr_metric *s;
    pthread_mutex_lock(&m->lock); /* one update: a render sees the old error or the new one */
    for (pfr_metric *e = m->err_info->first, *next; e; e = next) {
        next = e->next;
        if (strcmp(e->values[0], source) == 0)
            unlink_locked(m->err_info, e);
    }
    int rc = series_locked(m->err_info, lv, &s);
    if (rc == 0) {
        s->value = 1;
        rc = series_locked(m->err_time, src, &s);
    }
    if (rc == 0) {
        s->value = unix_time;
        rc = series_locked(m->err_count, src, &s);
    }
    if (rc == 0)
        s->value += 1;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int pfr_metrics_go_alloc_families(pfr_metrics *m, pfr_metric_family **bytes,
                                  pfr_metric_family **objects)
{
    int rc = pfr_metrics_row_family(m, &go_alloc_rows[0], bytes);
    return rc ? rc : pfr_metrics_row_family(m, &go_alloc_rows[1], objects);
}

/* ---- rendering ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* HELP text escapes \ and newline; label values also escape ". */
static void put_escaped(buf *b, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(b, "\\\\");
        else if (*s == '\n')
            puts_(b, "\\n");
        else if (quote && *s == '"')
            puts_(b, "\\\"");
        else
            put(b, s, 1);
    }
}

static void put_value(buf *b, double v)
{
    char tmp[40];
    if (isnan(v))
        snprintf(tmp, sizeof(tmp), "NaN");
    else if (isinf(v))
        snprintf(tmp, sizeof(tmp), v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(int64_t)v && fabs(v) < 9e15)
        snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
    else
        snprintf(tmp, sizeof(tmp), "%.17g", v);
    puts_(b, tmp);
}

static void render_family(buf *b, const pfr_metric_family *f)
{
    if (!f->first)
        return; /* a family with no series says nothing */
    puts_(b, "# HELP ");
    puts_(b, f->name);
    puts_(b, " ");
    put_escaped(b, f->help, false);
    puts_(b, "\n# TYPE ");
    puts_(b, f->name);
    puts_(b, f->type == PFR_METRIC_COUNTER ? " counter\n" : " gauge\n");
    for (const pfr_metric *s = f->first; s; s = s->next) {
        puts_(b, f->name);
        for (size_t i = 0; i < f->nlabels; i++) {
            puts_(b, i ? "," : "{");
            puts_(b, f->labels[i]);
            puts_(b, "=\"");
            put_escaped(b, s->values[i], true);
            puts_(b, "\"");
        }
        puts_(b, f->nlabels ? "} " : " ");
        put_value(b, s->value);
        puts_(b, "\n");
    }
}

int pfr_metrics_render(pfr_metrics *m, char **out, size_t *len)
{
    buf b = {0};
    put(&b, "", 0);
    pthread_mutex_lock(&m->lock);
    for (const pfr_metric_family *f = m->first; f; f = f->next)
        render_family(&b, f);
    pthread_mutex_unlock(&m->lock);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
