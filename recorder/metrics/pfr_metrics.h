/*
 * pfr_metrics: a small registry of Prometheus counters and gauges with labels, rendered in the
 * text exposition format (0.0.4) and served over HTTP by libmicrohttpd.
 *
 * A family is a metric name, help text, type and label names; a series is one set of label
 * values in a family and holds one value. The daemon registers its families at start-up and
 * updates series every tick from any thread; the exporter thread renders a consistent snapshot
 * (one mutex guards the whole registry, so a render never sees half an update).
 *
 * Ownership: the registry owns families and series. Handles stay valid until the series is
 * removed (pfr_metrics_remove) or the registry is freed. Rendered text is malloc'ed and owned by
 * the caller. Errors are negative errnos: -EINVAL for a bad name or label count, -ENOSPC when a
 * family reaches its series bound (counted in pfr_metrics_series_dropped_total), -ENOMEM.
 */
#ifndef PFR_METRICS_H
#define PFR_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_metrics pfr_metrics;
typedef struct pfr_metric_family pfr_metric_family;
typedef struct pfr_metric pfr_metric;

enum pfr_metric_type { PFR_METRIC_COUNTER = 0, PFR_METRIC_GAUGE };

#define PFR_METRICS_DEFAULT_LISTEN "127.0.0.1:9465"

/* max_series bounds the series of each family (0 = 10000): a runaway label (say, a pid that
 * never repeats) cannot grow the registry without bound. */
int pfr_metrics_new(size_t max_series, pfr_metrics **out);
void pfr_metrics_free(pfr_metrics *m);

/* Register a family, or find the one already registered under name (then type, help and label
 * names must match, else -EINVAL: one name is one family). Names follow Prometheus:
 * [a-zA-Z_:][a-zA-Z0-9_:]* for the metric, [a-zA-Z_][a-zA-Z0-9_]* for labels. nlabels may be 0.
 * The recorder's parts register theirs from tables of rows (pfr_metric_rows.h). */
int pfr_metrics_family(pfr_metrics *m, const char *name, const char *help,
                       enum pfr_metric_type type, const char *const *label_names, size_t nlabels,
                       pfr_metric_family **out);

/* The series of f with these label values (one per label name), created at 0 if new. */
int pfr_metrics_series(pfr_metric_family *f, const char *const *label_values, pfr_metric **out);

/* Counters only go up: add ignores negative and NaN increments. set works for both types; for a
 * counter it mirrors a cumulative total kept elsewhere (a Go runtime's allocation count). */
void pfr_metric_add(pfr_metric *s, double v);
void pfr_metric_set(pfr_metric *s, double v);
double pfr_metric_value(pfr_metric *s);

/* Look up or create the series and add / set in one call. */
int pfr_metrics_add(pfr_metric_family *f, const char *const *label_values, double v);
int pfr_metrics_set(pfr_metric_family *f, const char *const *label_values, double v);

/* Drop one series (a process that exited). -ENOENT if there is none. */
int pfr_metrics_remove(pfr_metric_family *f, const char *const *label_values);
/* Drop every series of f whose label `label` has value `value` (say, all series of one pid).
 * Returns how many were dropped, or -EINVAL if f has no such label. */
int pfr_metrics_remove_matching(pfr_metric_family *f, const char *label, const char *value);
size_t pfr_metrics_num_series(pfr_metric_family *f);

/* The last error of a source ("cpu", "goheap", "store", "shipper" ...), as
 *   pfr_last_error_info{source="...",message="..."} 1
 *   pfr_last_error_timestamp_seconds{source="..."} <unix time>
 *   pfr_errors_total{source="..."} <count>
 * Only the newest message of each source is kept. */
int pfr_metrics_set_last_error(pfr_metrics *m, const char *source, const char *message,
                               double unix_time);

/* The Go allocation counters (labels: service, container_id, pid, exe), fed each tick with
 * pfr_metrics_set() from pfr_goheap_proc.alloc_bytes_total / alloc_objects_total and dropped
 * with pfr_metrics_remove_matching(f, "pid", ...) when the process is gone. */
#define PFR_METRIC_GO_ALLOC_BYTES   "container_go_alloc_bytes_total"
#define PFR_METRIC_GO_ALLOC_OBJECTS "container_go_alloc_objects_total"
#define PFR_METRIC_GO_LABELS        4
int pfr_metrics_go_alloc_families(pfr_metrics *m, pfr_metric_family **bytes,
                                  pfr_metric_family **objects);

/* Render everything in the Prometheus text format. */
int pfr_metrics_render(pfr_metrics *m, char **out, size_t *len);

/* ---- HTTP exporter ---- */
typedef struct pfr_metrics_server pfr_metrics_server;

/* Serve GET /metrics on listen ("127.0.0.1:9465", "[::1]:9465", "0.0.0.0:0" for any port) from
 * a thread of its own. err receives the reason on failure (bad address, port in use). */
int pfr_metrics_serve(pfr_metrics *m, const char *listen, pfr_metrics_server **out, char *err,
                      size_t errlen);
/* The port actually bound (useful with port 0). */
uint16_t pfr_metrics_server_port(const pfr_metrics_server *s);
/* A POST handler: the query's arguments as n (key, value) pairs (a value may be NULL: "?k"),
 * whether the client connected from the loopback; it writes its reply's text (a line) into
 * reply and returns the HTTP status. Called on the server's thread. */
typedef unsigned (*pfr_metrics_post_fn)(void *ctx, const char *const *keys,
                                        const char *const *values, size_t n, bool loopback,
                                        char *reply, size_t replylen);
/* Answer POST path with fn (one path; NULL fn: none again, 404). Any thread; once it returns,
 * a handler taken away is not running. POSTs are answered one at a time. */
void pfr_metrics_server_on_post(pfr_metrics_server *s, const char *path, pfr_metrics_post_fn fn,
                                void *ctx);
/* Stop serving and free the server (the registry stays). */
void pfr_metrics_server_stop(pfr_metrics_server *s);

#ifdef __cplusplus
}
#endif
#endif
