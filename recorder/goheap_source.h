/*
 * goheap_source: the Go heap profiler (recorder/goheap) as a recorder source. Every
 * go_heap_interval it reads the memory-profile buckets of the host's Go processes and writes one
 * profile per process (labels container.id and pid, service named by the same rules as the CPU
 * profiler), names frames with the CPU profiler's symbolizer (one symbol cache for both) and
 * feeds the container_go_alloc_*_total counters.
 */
#ifndef PFR_RECORDER_GOHEAP_SOURCE_H
#define PFR_RECORDER_GOHEAP_SOURCE_H

#include "config.h"
#include "cpu_source.h"
#include "daemon_metrics.h"
#include "exe_scan.h"
#include "source.h"

typedef struct pfr_goheap_source pfr_goheap_source;

/* cpu, exes (the shared /proc scan; NULL: its own), metrics and identity (may be NULL) must
 * outlive the source. Returns 0 or a negative errno with a reason. */
int pfr_goheap_source_new(const pfr_config *cfg, pfr_cpu_source *cpu, pfr_exe_scan *exes,
                          pfr_daemon_metrics *metrics, struct pfr_identity *identity,
                          pfr_goheap_source **out, char *err, size_t errlen);
pfr_source pfr_goheap_source_as_source(pfr_goheap_source *g);
void pfr_goheap_source_stats(pfr_goheap_source *g, pfr_goheap_stats *st);

#endif
