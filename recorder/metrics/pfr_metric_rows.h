/*
 * pfr_metric_rows: metrics as rows of tables, the way settings are (common/pfr_settings.h).
 *
 * A part of the recorder that has metrics (the ring, a source, the memory budget...) keeps its
 * statistics in a struct and describes every family it publishes with one row of a const table:
 * {name, type, help, label names, where each series' value is read in the struct}. Publishing
 * the struct is one loop over the table (pfr_metrics_publish); a new counter is one row. From
 * the same rows come the metric reference of docs/operations.md (pfr_metric_tables_write_ref)
 * and the checks of every name (pfr_metric_tables_check): a counter's name ends in _total and
 * nothing else's does, no name is described twice.
 *
 * A value is read from the stats struct by PFR_METRIC_FIELD(T, field) (any integer or bool
 * field; the macro picks the read from the field's type), or computed by a getter (.get) when it
 * is no single field (a difference, a comparison). .divisor divides it (1e9: nanoseconds
 * published as seconds).
 *
 * A row's series are one of:
 *   - none of labels, series, name_of: one unlabelled series read from the row's field;
 *   - .series: a list of label values, each with its field ({NULL} ends it);
 *   - .name_of: one series per value k of an enum, first <= k < end, labelled name_of(k) and
 *     read from element k of the array whose element 0 is the row's field;
 *   - labels but neither: one series read from the row's field, labelled with the `instance`
 *     given to pfr_metrics_publish (one struct per instance: a collector per source);
 *   - PFR_METRIC_OWN: published by its own code (the registry's last errors, Go processes'
 *     allocations); the row only names and documents the family.
 *
 * Tables are const and static; nothing here allocates but the registry's families.
 */
#ifndef PFR_METRIC_ROWS_H
#define PFR_METRIC_ROWS_H

#include <stddef.h>
#include <stdio.h>

#include "pfr_metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFR_METRIC_MAX_LABELS 4

/* How a value is read from the stats struct (PFR_METRIC_FIELD picks it). */
enum pfr_metric_read {
    PFR_MREAD_NONE = 0, /* no field: a getter, a PFR_METRIC_OWN row */
    PFR_MREAD_BOOL,
    PFR_MREAD_INT,
    PFR_MREAD_UINT,
    PFR_MREAD_LONG,
    PFR_MREAD_ULONG,
    PFR_MREAD_LLONG,
    PFR_MREAD_ULLONG,
};

/* (clang-format cannot lay out _Generic's associations) */
/* clang-format off */
#define PFR_METRIC_READ_OF(x)                                                                      \
    _Generic((x),                                                                                  \
        _Bool: PFR_MREAD_BOOL,                                                                     \
        int: PFR_MREAD_INT,                                                                        \
        unsigned: PFR_MREAD_UINT,                                                                  \
        long: PFR_MREAD_LONG,                                                                      \
        unsigned long: PFR_MREAD_ULONG,                                                            \
        long long: PFR_MREAD_LLONG,                                                                \
        unsigned long long: PFR_MREAD_ULLONG)
/* clang-format on */

/* The field f of struct type T (a member path: "bpf.samples", "refused[0]"). */
#define PFR_METRIC_FIELD(T, f) .off = offsetof(T, f), .read = PFR_METRIC_READ_OF(((T *)0)->f)

/* A computed value: fn(stats). */
typedef double (*pfr_metric_get_fn)(const void *stats);

/* One series of a row with .series: its label values, and where its value is. */
typedef struct pfr_metric_series {
    const char *values[PFR_METRIC_MAX_LABELS]; /* one per label of the row; NULL ends a list */
    size_t off;
    enum pfr_metric_read read;
    pfr_metric_get_fn get;
} pfr_metric_series;

/* A list of series for .series: PFR_METRIC_SERIES({{"a"}, FIELD(x)}, {{"b"}, FIELD(y)}). */
#define PFR_METRIC_SERIES(...) ((const pfr_metric_series[]){__VA_ARGS__, {.values = {NULL}}})

enum pfr_metric_row_flags {
    PFR_METRIC_OWN = 1u << 0, /* published by its own code, not by pfr_metrics_publish */
};

typedef struct pfr_metric_row {
    const char *name;
    enum pfr_metric_type type;
    const char *help;
    /* the value of the row's series (unless .series says per series) */
    size_t off;
    enum pfr_metric_read read;
    pfr_metric_get_fn get;
    double divisor; /* 0: 1 */
    const char *labels[PFR_METRIC_MAX_LABELS];
    const pfr_metric_series *series;
    const char *(*name_of)(int k);
    int first, end;
    unsigned flags;
    /* for the docs, when the label values are known only at run time (instance rows, OWN
     * rows): what they are ("each source", "service, container_id, pid, exe") */
    const char *doc_values;
} pfr_metric_row;

/* The rows of one part, under the title the docs give it. */
typedef struct pfr_metric_table {
    const char *title;
    const pfr_metric_row *rows;
    size_t nrows;
} pfr_metric_table;

#define PFR_METRIC_TABLE(title, rows)                                                              \
    {                                                                                              \
        (title), (rows), sizeof(rows) / sizeof((rows)[0])                                          \
    }

/* Set every series of t's rows (but PFR_METRIC_OWN ones) from stats, registering the families
 * on first use. instance: the label value of instance rows (NULL when t has none). A family
 * that cannot be registered (out of memory, a shape clash) is skipped; returns the first such
 * error, else 0. */
int pfr_metrics_publish(pfr_metrics *m, const pfr_metric_table *t, const void *stats,
                        const char *instance);

/* Register the family of row r (its labels), as pfr_metrics_family. */
int pfr_metrics_row_family(pfr_metrics *m, const pfr_metric_row *r, pfr_metric_family **out);

/* The count of r's labels (its first PFR_METRIC_MAX_LABELS names up to a NULL). */
size_t pfr_metric_row_nlabels(const pfr_metric_row *r);

/* The value of a field read as PFR_METRIC_FIELD found it. */
double pfr_metric_read_field(const void *stats, size_t off, enum pfr_metric_read read);

/* Check the rows of n tables together: names and labels valid, a counter's name ends in _total
 * and no other name does, help given, each series has a value per label, no name twice. 0, or
 * -EINVAL with every mistake (one per line, up to errlen) in err. */
int pfr_metric_tables_check(const pfr_metric_table *const *tables, size_t n, char *err,
                            size_t errlen);

/* The metric reference, for scripts/gen-config-docs.sh: one block between "<!-- metrics:
 * PROGRAM:reference begin -->" and "... end -->" holding per table its title and a Markdown
 * table | metric | type | labels | meaning |. */
void pfr_metric_tables_write_ref(const pfr_metric_table *const *tables, size_t n,
                                 const char *program, FILE *out);

/* One line per series name, for scripts: "NAME TYPE LABEL=V1|V2 ..." (instance and OWN rows:
 * "LABEL=*"). */
void pfr_metric_tables_write_list(const pfr_metric_table *const *tables, size_t n, FILE *out);

/* The registry's own families (last errors, dropped series) and the Go allocation counters. */
extern const pfr_metric_table pfr_metrics_registry_table;
extern const pfr_metric_table pfr_metrics_go_alloc_table;

#ifdef __cplusplus
}
#endif
#endif
