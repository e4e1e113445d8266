/* Metrics as rows: publishing a stats struct through its table, the checks, the reference. */
#include "pfr_metric_rows.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

size_t pfr_metric_row_nlabels(const pfr_metric_row *r)
{
    size_t n = 0;
    while (n < PFR_METRIC_MAX_LABELS && r->labels[n])
        n++;
    return n;
}

static size_t read_size(enum pfr_metric_read read)
{
    switch (read) {
    case PFR_MREAD_BOOL:
        return sizeof(bool);
    case PFR_MREAD_INT:
        return sizeof(int);
    case PFR_MREAD_UINT:
        return sizeof(unsigned);
    case PFR_MREAD_LONG:
        return sizeof(long);
    case PFR_MREAD_ULONG:
        return sizeof(unsigned long);
    case PFR_MREAD_LLONG:
        return sizeof(long long);
    case PFR_MREAD_ULLONG:
        return sizeof(unsigned long long);
    case PFR_MREAD_NONE:
        break;
    }
    return 0;
}

double pfr_metric_read_field(const void *stats, size_t off, enum pfr_metric_read read)
{
    const char *p = (const char *)stats + off;
    switch (read) {
    case PFR_MREAD_BOOL:
        return *(const bool *)p ? 1 : 0;
    case PFR_MREAD_INT:
        return (double)*(const int *)p;
    case PFR_MREAD_UINT:
        return (double)*(const unsigned *)p;
    case PFR_MREAD_LONG:
        return (double)*(const long *)p;
    case PFR_MREAD_ULONG:
        return (double)*(const unsigned long *)p;
    case PFR_MREAD_LLONG:
        return (double)*(const long long *)p;
    case PFR_MREAD_ULLONG:
        return (double)*(const unsigned long long *)p;
    case PFR_MREAD_NONE:
        break;
    }
    return 0;
}

static double value_of(const pfr_metric_row *r, const void *stats, size_t off,
                       enum pfr_metric_read read, pfr_metric_get_fn get)
{
    double v = get ? get(stats) : pfr_metric_read_field(stats, off, read);
    return r->divisor != 0 ? v / r->divisor : v;
}

static void publish_row(pfr_metric_family *f, const pfr_metric_row *r, const void *stats,
                        const char *instance)
{
    if (r->series) {
        for (const pfr_metric_series *s = r->series; s->values[0]; s++)
            pfr_metrics_set(f, s->values, value_of(r, stats, s->off, s->read, s->get));
    } else if (r->name_of) {
        size_t size = read_size(r->read);
        for (int k = r->first; k < r->end; k++) {
            const char *v[1] = {r->name_of(k)};
            pfr_metrics_set(f, v, value_of(r, stats, r->off + (size_t)k * size, r->read, NULL));
        }
    } else if (r->labels[0]) {
        const char *v[1] = {instance};
        if (instance)
            pfr_metrics_set(f, v, value_of(r, stats, r->off, r->read, r->get));
    } else {
        pfr_metrics_set(f, NULL, value_of(r, stats, r->off, r->read, r->get));
    }
}

int pfr_metrics_publish(pfr_metrics *m, const pfr_metric_table *t, const void *stats,
                        const char *instance)
{
    int first_rc = 0;
    for (size_t i = 0; i < t->nrows; i++) {
        const pfr_metric_row *r = &t->rows[i];
        if (r->flags & PFR_METRIC_OWN)
            continue;
        pfr_metric_family *f;
        int rc = pfr_metrics_row_family(m, r, &f);
        if (rc) {
            first_rc = first_rc ? first_rc : rc;
            continue;
        }
        publish_row(f, r, stats, instance);
    }
    return first_rc;
}

/* ---- checks ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    int mistakes;
} errs;

static void mistake(errs *e, const char *fmt, ...)
{
    e->mistakes++;
    if (e->len + 1 >= e->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->buf + e->len, e->cap - e->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        e->len += (size_t)n < e->cap - e->len ? (size_t)n : e->cap - e->len - 1;
    if (e->len + 1 < e->cap)
        e->buf[e->len++] = '\n', e->buf[e->len] = '\0';
}

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

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void check_series(errs *e, const pfr_metric_row *r, size_t nl)
{
    for (const pfr_metric_series *s = r->series; s->values[0]; s++) {
        size_t nv = 0;
        while (nv < PFR_METRIC_MAX_LABELS && s->values[nv])
            nv++;
        if (nv != nl)
            mistake(e, "%s{%s}: %zu label values for %zu labels", r->name, s->values[0], nv, nl);
        if (!s->get && s->read == PFR_MREAD_NONE)
            mistake(e, "%s{%s}: no field or getter", r->name, s->values[0]);
    }
}

static void check_row(errs *e, const pfr_metric_row *r)
{
    if (!valid_name(r->name, true)) {
        mistake(e, "'%s': not a metric name", r->name ? r->name : "(null)");
        return;
    }
    bool total = ends_with(r->name, "_total");
    if (r->type == PFR_METRIC_COUNTER && !total)
        mistake(e, "%s: a counter whose name does not end in _total", r->name);
    if (r->type != PFR_METRIC_COUNTER && total)
        mistake(e, "%s: not a counter, but its name ends in _total", r->name);
    if (!r->help || !r->help[0])
        mistake(e, "%s: no help", r->name);
    size_t nl = pfr_metric_row_nlabels(r);
    for (size_t i = 0; i < nl; i++)
        if (!valid_name(r->labels[i], false) || strncmp(r->labels[i], "__", 2) == 0)
            mistake(e, "%s: '%s' is not a label name", r->name, r->labels[i]);
    if (r->flags & PFR_METRIC_OWN)
        return;
    if (r->series) {
        check_series(e, r, nl);
    } else if (r->name_of) {
        if (nl != 1 || r->first >= r->end || r->read == PFR_MREAD_NONE)
            mistake(e, "%s: an enum row needs one label, first < end and a field", r->name);
    } else if (nl > 1) {
        mistake(e, "%s: %zu labels and no series", r->name, nl);
    } else if (!r->get && r->read == PFR_MREAD_NONE) {
        mistake(e, "%s: no field or getter", r->name);
    }
}

int pfr_metric_tables_check(const pfr_metric_table *const *tables, size_t n, char *err,
                            size_t errlen)
{
    errs e = {err, 0, errlen, 0};
    if (errlen)
        err[0] = '\0';
    for (size_t t = 0; t < n; t++) {
        for (size_t i = 0; i < tables[t]->nrows; i++) {
            const pfr_metric_row *r = &tables[t]->rows[i];
            check_row(&e, r);
            if (!r->name)
                continue;
            /* a family is one row: a name twice is a mistake even with the same help and type */
            for (size_t u = 0; u <= t; u++)
                for (size_t j = 0; j < (u == t ? i : tables[u]->nrows); j++)
                    if (tables[u]->rows[j].name && !strcmp(tables[u]->rows[j].name, r->name))
                        mistake(&e, "%s: described twice (%s, %s)", r->name, tables[u]->title,
                                tables[t]->title);
        }
    }
    if (e.len && e.buf[e.len - 1] == '\n')
        e.buf[--e.len] = '\0';
    return e.mistakes ? -EINVAL : 0;
}

/* ---- the reference ---- */

/* Markdown table cells: '|' would end the cell. */
static void put_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

/* The values of a row's label, each once (two labels repeat the first's), in backquotes or not,
 * sep between. */
static void put_values(FILE *out, const pfr_metric_row *r, size_t label, bool code, const char *sep)
{
    bool any = false;
    if (r->series) {
        for (const pfr_metric_series *s = r->series; s->values[0]; s++) {
            bool seen = false;
            for (const pfr_metric_series *p = r->series; p < s && !seen; p++)
                seen = !strcmp(p->values[label], s->values[label]);
            if (seen)
                continue;
            fputs(any ? sep : "", out);
            fprintf(out, code ? "`%s`" : "%s", s->values[label]);
            any = true;
        }
    } else if (r->name_of) {
        for (int k = r->first; k < r->end; k++) {
            fputs(any ? sep : "", out);
            fprintf(out, code ? "`%s`" : "%s", r->name_of(k));
            any = true;
        }
    }
}

static void put_labels(FILE *out, const pfr_metric_row *r)
{
    size_t nl = pfr_metric_row_nlabels(r);
    for (size_t i = 0; i < nl; i++) {
        fprintf(out, "%s`%s`", i ? "; " : "", r->labels[i]);
        if (r->series || r->name_of) {
            fputs(": ", out);
            put_values(out, r, i, true, ", ");
        }
    }
    if (nl && !r->series && !r->name_of && r->doc_values) {
        fputs(" (", out);
        put_cell(out, r->doc_values);
        fputc(')', out);
    }
}

void pfr_metric_tables_write_ref(const pfr_metric_table *const *tables, size_t n,
                                 const char *program, FILE *out)
{
    fprintf(out, "<!-- metrics:%s:reference begin -->\n", program);
    for (size_t t = 0; t < n; t++) {
        fprintf(out, "%s**%s**\n\n", t ? "\n" : "", tables[t]->title);
        fputs("| metric | type | labels | meaning |\n|---|---|---|---|\n", out);
        for (size_t i = 0; i < tables[t]->nrows; i++) {
            const pfr_metric_row *r = &tables[t]->rows[i];
            fprintf(out, "| `%s` | %s | ", r->name,
                    r->type == PFR_METRIC_COUNTER ? "counter" : "gauge");
            put_labels(out, r);
            fputs(" | ", out);
            put_cell(out, r->help);
            fputs(" |\n", out);
        }
    }
    fprintf(out, "<!-- metrics:%s:reference end -->\n", program);
}

void pfr_metric_tables_write_list(const pfr_metric_table *const *tables, size_t n, FILE *out)
{
    for (size_t t = 0; t < n; t++) {
        for (size_t i = 0; i < tables[t]->nrows; i++) {
            const pfr_metric_row *r = &tables[t]->rows[i];
            fprintf(out, "%s %s", r->name, r->type == PFR_METRIC_COUNTER ? "counter" : "gauge");
            size_t nl = pfr_metric_row_nlabels(r);
            for (size_t l = 0; l < nl; l++) {
                fprintf(out, " %s=", r->labels[l]);
                if (r->series || r->name_of)
                    put_values(out, r, l, false, "|");
                else
                    fputc('*', out);
            }
            fputc('\n', out);
        }
    }
}
