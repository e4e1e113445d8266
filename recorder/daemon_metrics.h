/*
 * daemon_metrics: the recorder's own health as Prometheus metrics (samples taken and lost,
 * processes symbolized, ring bytes against the cap in force, chunks evicted (for the cap or the
 * disk's free space) and lost before shipping, the last error of each source), next to the Go
 * allocation counters the heap profiler feeds. The registry is served over HTTP (pfr_metrics) when
 * a listen address is configured.
 *
 * Updates mirror cumulative counters kept by the sources: called from the daemon's loop after
 * each interval. The last-error calls may come from any thread.
 */
#ifndef PFR_RECORDER_DAEMON_METRICS_H
#define PFR_RECORDER_DAEMON_METRICS_H

#include <stddef.h>

#include "cpu_source.h"
#include "pfr_goheap.h"
#include "pfr_identity.h"
#include "pfr_metrics.h"
#include "pfr_scrape.h"
#include "pfr_store.h"

typedef struct pfr_daemon_metrics pfr_daemon_metrics;

/* listen "" = keep the registry but serve nothing. err receives the reason when the address
 * cannot be bound. */
int pfr_daemon_metrics_new(const char *listen, pfr_daemon_metrics **out, char *err, size_t errlen);
void pfr_daemon_metrics_free(pfr_daemon_metrics *m);

pfr_metrics *pfr_daemon_metrics_registry(pfr_daemon_metrics *m);
/* The port served (0 when not serving). */
unsigned pfr_daemon_metrics_port(const pfr_daemon_metrics *m);

void pfr_daemon_metrics_cpu(pfr_daemon_metrics *m, const pfr_cpu_source_stats *st);
/* The symbol cache's counters (called by pfr_daemon_metrics_cpu with the CPU source's). */
void pfr_daemon_metrics_symbolizer(pfr_daemon_metrics *m, const pfr_sym_stats *st);
/* The unwind tables' figures (called by pfr_daemon_metrics_cpu). */
void pfr_daemon_metrics_unwind(pfr_daemon_metrics *m, const pfr_cpu_source_stats *st);
void pfr_daemon_metrics_store(pfr_daemon_metrics *m, const pfr_store_stats *st,
                              unsigned long long write_errors);
void pfr_daemon_metrics_goheap(pfr_daemon_metrics *m, const pfr_goheap_stats *st);
/* The Coroot identities' resolver: cgroups by state, metadata fetches. */
void pfr_daemon_metrics_identity(pfr_daemon_metrics *m, const pfr_identity_stats *st);
void pfr_daemon_metrics_scrape(pfr_daemon_metrics *m, const pfr_scrape_stats *st);
/* The newest error of a source ("cpu", "goheap", "scrape", "store"). */
void pfr_daemon_metrics_error(pfr_daemon_metrics *m, const char *source, const char *message);

#endif
