/*
 * daemon_metrics: the recorder's own health as Prometheus metrics: ring bytes against the cap in
 * force, chunks evicted (for the cap or the disk's free space) and lost before shipping, the
 * identities' resolver, the last error of each source. Each source exports its own counters
 * through its descriptor (source.h) with the helpers below; this module knows none of them. The
 * registry is served over HTTP (pfr_metrics) when a listen address is configured.
 *
 * Updates mirror cumulative counters: called from the daemon's loop after each interval. The
 * last-error calls may come from any thread.
 */
#ifndef PFR_RECORDER_DAEMON_METRICS_H
#define PFR_RECORDER_DAEMON_METRICS_H

#include <stddef.h>

#include "pfr_identity.h"
#include "pfr_metrics.h"
#include "pfr_store.h"

typedef struct pfr_daemon_metrics pfr_daemon_metrics;

/* listen "" = keep the registry but serve nothing. err receives the reason when the address
 * cannot be bound. */
int pfr_daemon_metrics_new(const char *listen, pfr_daemon_metrics **out, char *err, size_t errlen);
void pfr_daemon_metrics_free(pfr_daemon_metrics *m);

pfr_metrics *pfr_daemon_metrics_registry(pfr_daemon_metrics *m);
/* The port served (0 when not serving). */
unsigned pfr_daemon_metrics_port(const pfr_daemon_metrics *m);

/* One unlabelled series set to v. A registration failure (out of memory) only loses it. */
void pfr_daemon_metrics_put(pfr_daemon_metrics *m, const char *name, const char *help,
                            enum pfr_metric_type t, double v);
/* One series of a family with a single label. */
void pfr_daemon_metrics_put1(pfr_daemon_metrics *m, const char *name, const char *help,
                             enum pfr_metric_type t, const char *label, const char *value,
                             double v);
void pfr_daemon_metrics_store(pfr_daemon_metrics *m, const pfr_store_stats *st,
                              unsigned long long write_errors);
/* The Coroot identities' resolver: cgroups by state, metadata fetches. */
void pfr_daemon_metrics_identity(pfr_daemon_metrics *m, const pfr_identity_stats *st);
/* Answer POST path on the metrics listener with fn (pfr_metrics_server_on_post); nothing when
 * no listener is served. */
void pfr_daemon_metrics_on_post(pfr_daemon_metrics *m, const char *path, pfr_metrics_post_fn fn,
                                void *ctx);
/* The newest error of a source ("cpu", "goheap", "scrape", "store"). */
void pfr_daemon_metrics_error(pfr_daemon_metrics *m, const char *source, const char *message);

#endif
