/*
 * goheap_source: the Go heap profiler (recorder/goheap) as a recorder source. Every
 * go_heap_interval it reads the memory-profile buckets of the host's Go processes and writes one
 * profile per process (labels container.id and pid, service named by the same rules as the CPU
 * profiler), names frames with the CPU profiler's symbolizer (one symbol cache for both) and
 * feeds the container_go_alloc_*_total counters.
 */
#ifndef PFR_RECORDER_GOHEAP_SOURCE_H
#define PFR_RECORDER_GOHEAP_SOURCE_H

#include "source.h"

/* Its settings ([recorder] keys; rows in goheap_source.c). */
typedef struct pfr_goheap_config {
    int mode;            /* enum pfr_goheap_mode */
    int64_t interval_ns; /* between collections */
} pfr_goheap_config;

/* Its row of the source table: wanted unless go_heap_profiler = disabled. Its config struct is
 * a pfr_goheap_config. */
extern const pfr_source_desc pfr_goheap_source_desc;

#endif
