/*
 * daemon_metrics: the recorder's own health as Prometheus metrics: ring bytes against the cap in
 * force, chunks evicted (for the cap or the disk's free space) and lost before shipping, the
 * identities' resolver, the collectors, the remote-file guard, the memory budget, the symbol
 * cache, the last error
 * of each source: each a table of rows (pfr_metric_rows.h). Each source brings its own tables in
 * its descriptor (source.h); this module knows none of them. The registry is served over HTTP
 * (pfr_metrics) when a listen address is configured.
 *
 * Updates mirror cumulative counters: called from the daemon's loop after each interval. The
 * last-error calls may come from any thread.
 */
#ifndef PFR_RECORDER_DAEMON_METRICS_H
#define PFR_RECORDER_DAEMON_METRICS_H

#include <stddef.h>

#include "pfr_identity.h"
#include "pfr_metric_rows.h"
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

/* Set t's series from stats (pfr_metrics_publish); instance labels its instance rows. */
void pfr_daemon_metrics_publish(pfr_daemon_metrics *m, const pfr_metric_table *t, const void *stats,
                                const char *instance);
/* The ring's figures, with the profiles the daemon could not write. */
void pfr_daemon_metrics_store(pfr_daemon_metrics *m, const pfr_store_stats *st,
                              const pfr_store_mem_stats *mem, unsigned long long write_errors);
/* Answer POST path on the metrics listener with fn (pfr_metrics_server_on_post); nothing when
 * no listener is served. */
void pfr_daemon_metrics_on_post(pfr_daemon_metrics *m, const char *path, pfr_metrics_post_fn fn,
                                void *ctx);

/* The daemon's own tables (its parts that are no source): the registry's families, the ring,
 * the identities' resolver (pfr_identity_stats), the collectors (pfr_collector_stats, one
 * instance per source), the remote-file guard (pfr_fsguard_stats) and the memory budget
 * (pfr_membudget_stats). */
extern const pfr_metric_table pfr_daemon_store_metrics;
extern const pfr_metric_table pfr_daemon_identity_metrics;
extern const pfr_metric_table pfr_daemon_collector_metrics;
extern const pfr_metric_table pfr_daemon_fsguard_metrics;
extern const pfr_metric_table pfr_daemon_membudget_metrics;
/* The symbol cache: the daemon's symbolizer (pfr_sym_stats, pfr_shared_sym_stats), published
 * by its owner whichever sources use it (the CPU source may be off). */
extern const pfr_metric_table pfr_daemon_symbolizer_metrics;
/* (defined in daemon_triggers.c) */
extern const pfr_metric_table pfr_daemon_triggers_metrics;
/* All of them, NULL-terminated, in the docs' order. */
extern const pfr_metric_table *const pfr_daemon_metric_tables[];

/* The newest error of a source ("cpu", "goheap", "scrape", "store"). */
void pfr_daemon_metrics_error(pfr_daemon_metrics *m, const char *source, const char *message);

#endif
