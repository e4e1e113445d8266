/* cpu_metrics: the CPU source's counters as the daemon's metrics (its descriptor's export). */
#ifndef PFR_RECORDER_CPU_METRICS_H
#define PFR_RECORDER_CPU_METRICS_H

#include "cpu_source.h"
#include "daemon_metrics.h"

/* self: the pfr_cpu_source. */
void pfr_cpu_source_export_metrics(void *self, pfr_daemon_metrics *m);

#endif
