/* cpu_metrics: the CPU source's counters as tables of metric rows (its descriptor's metrics):
 * samples, processes and profiles; the unwind tables. All read from one
 * pfr_cpu_source_stats. */
#ifndef PFR_RECORDER_CPU_METRICS_H
#define PFR_RECORDER_CPU_METRICS_H

#include "cpu_source.h"
#include "pfr_metric_rows.h"

/* NULL-terminated. */
extern const pfr_metric_table *const pfr_cpu_metric_tables[];

/* ops.stats: self the pfr_cpu_source, out a pfr_cpu_source_stats. */
void pfr_cpu_source_stats_op(void *self, void *out);

#endif
