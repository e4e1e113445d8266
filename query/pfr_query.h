/*
 * pfr_query: the query engine over the ring, shared by the `pfr` command line tool and the
 * `pfr serve` web page (one implementation of merging, filtering and diffing).
 *
 * A query names a time range, a service (or all), a profile type (or "pick the obvious one") and
 * key=value labels. Planning resolves the query against the ring's streams once: which type,
 * which services, and whether each label is a profile label (host.name, container.id, ...) or a
 * sample label (pid, comm, ...). The plan is then run over one or more ranges: a flame tree, a
 * merged pprof profile, a timeline.
 *
 * Errors: 0 or a negative errno with a reason in err: -ENOENT "no data" (nothing in range, unknown
 * service or type), -EINVAL (ambiguous type, bad argument), others from the store.
 * Ownership: every *_new/out object belongs to the caller and has a matching free.
 */
#ifndef PFR_QUERY_H
#define PFR_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pfr_profile.h"
#include "pfr_store.h"
#include "pfr_tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default type when a service has several: CPU time from the eBPF sampler. */
#define PFR_QUERY_DEFAULT_TYPE "ebpf:cpu:nanoseconds"

/* The names (service, type, label keys and values) are given as pfr prints them (pfr_names.h,
 * PFR_NAME_JSON): "\\" and \xHH (HH 80-ff) stand for a backslash and a byte, any other text for
 * itself; pfr_query_plan_new reads them so. */
typedef struct pfr_query {
    const char *service;  /* NULL = every service that has the type */
    const char *type;     /* NULL = the only type, or PFR_QUERY_DEFAULT_TYPE if present */
    const pfr_kv *labels; /* key=value, each a profile label or a sample label */
    size_t nlabels;
} pfr_query;

typedef struct pfr_query_plan {
    char *type;
    bool gauge;      /* averaged over the chunks of a range (heap in-use, goroutines) */
    char *service;   /* copy of the query's service, NULL = all */
    char **services; /* services that have the type and the profile labels, sorted */
    size_t nservices;
    pfr_kv *profile_labels; /* owned strings */
    size_t nprofile_labels;
    pfr_kv *sample_labels; /* owned strings */
    size_t nsample_labels;
    int64_t first_ns, last_ns; /* coverage of the matching streams, for "no data" messages */
} pfr_query_plan;

typedef struct pfr_query_stats {
    uint64_t chunks;  /* chunks read */
    uint64_t corrupt; /* chunks skipped as corrupt */
} pfr_query_stats;

/* True for types shown as an average over a range rather than a sum (in-use heap, goroutines). */
bool pfr_query_type_is_gauge(const char *type);

int pfr_query_plan_new(pfr_store *s, const pfr_query *q, pfr_query_plan **out, char *err,
                       size_t errlen);

/* A query's names read back to the bytes the ring holds (for the store's own filters, which take
 * bytes). out->q is the query with those names; it borrows in's strings where they read as
 * themselves. Free with pfr_query_names_free (also after an error). 0 or -ENOMEM. */
typedef struct pfr_query_names {
    pfr_query q;
    pfr_kv *labels; /* q.labels */
    char **owned;   /* 2 + 2 * q.nlabels names that read as other bytes, else NULL */
} pfr_query_names;
int pfr_query_read_names(const pfr_query *in, pfr_query_names *out);
void pfr_query_names_free(pfr_query_names *n);
void pfr_query_plan_free(pfr_query_plan *p);

/* Human summary of a plan's filters, e.g. "service api, type ebpf:cpu:nanoseconds, pid=42". */
void pfr_query_plan_describe(const pfr_query_plan *p, char *buf, size_t len);
/* The plan and a range as a JSON object text (service, type, labels, from, to): metadata for the
 * JSON and HTML renderers. *out is malloc'ed. base_* may be 0 when not a diff. */
int pfr_query_meta_json(const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                        int64_t base_from_ns, int64_t base_to_ns, char **out);

/* Add the plan's profiles in [from, to) to side of t. With several services each gets its name
 * as the outermost frame. Call pfr_tree_finish() once every range is added. -ENOENT (with a
 * reason) when no chunk matched. */
int pfr_query_tree(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                   pfr_tree *t, int side, pfr_query_stats *st, char *err, size_t errlen);

/* One pprof profile of [from, to): every matching chunk merged (sample labels kept unless
 * drop_labels). *out is owned by the caller. */
int pfr_query_profile(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                      bool drop_labels, pfr_profile **out, pfr_query_stats *st, char *err,
                      size_t errlen);

/* ---- timeline ---- */
typedef struct pfr_timeline {
    int64_t from_ns, step_ns;
    size_t n;
    double *values;         /* per interval: sum (or time-weighted mean for gauges) of the type */
    uint64_t *chunks;       /* chunks that overlap each interval */
    int64_t *resolution_ns; /* the longest chunk overlapping each interval: past the step, the
                               ring holds only a roll-up there (its tier's step), spread flat */
} pfr_timeline;
/* step_ns 0 = a round step giving about 60 intervals. */
int pfr_query_timeline(pfr_store *s, const pfr_query_plan *p, int64_t from_ns, int64_t to_ns,
                       int64_t step_ns, pfr_timeline **out, pfr_query_stats *st, char *err,
                       size_t errlen);
void pfr_timeline_free(pfr_timeline *tl);
/* A round step (1s, 5s, 10s, 30s, 1m, ...) giving about want intervals. */
int64_t pfr_timeline_auto_step(int64_t from_ns, int64_t to_ns, size_t want);
/* A bar chart in the terminal, one line per interval. width = bar columns (0 = 50). */
int pfr_timeline_render_text(FILE *out, const pfr_timeline *tl, const pfr_query_plan *p, int width);
int pfr_timeline_render_json(FILE *out, const pfr_timeline *tl, const pfr_query_plan *p);

/* ---- what the ring holds ---- */
typedef struct pfr_ls_label {
    char *key;
    char **values; /* sorted */
    size_t nvalues;
} pfr_ls_label;

typedef struct pfr_ls_gap {
    int64_t from_ns, to_ns;
} pfr_ls_gap;

typedef struct pfr_ls_service {
    char *name;
    char **types; /* sorted */
    size_t ntypes;
    pfr_ls_label *labels; /* profile labels, sorted by key */
    size_t nlabels;
    uint64_t streams, chunks;
    int64_t first_ns, last_ns;
    int64_t typical_chunk_ns; /* median chunk length */
    pfr_ls_gap *gaps;         /* holes longer than twice the typical chunk, oldest first */
    size_t ngaps;
} pfr_ls_service;

typedef struct pfr_ls {
    pfr_ls_service *services; /* sorted by name */
    size_t nservices;
    pfr_store_stats stats;
    pfr_tier_info tiers[PFR_STORE_MAX_TIERS + 1]; /* what each tier holding chunks covers */
    size_t ntiers;
} pfr_ls;

int pfr_query_ls(pfr_store *s, pfr_ls **out, char *err, size_t errlen);
void pfr_ls_free(pfr_ls *ls);
int pfr_ls_render_text(FILE *out, const pfr_ls *ls, size_t max_values);
int pfr_ls_render_json(FILE *out, const pfr_ls *ls);

#ifdef __cplusplus
}
#endif
#endif
