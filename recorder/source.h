/*
 * source: what produces profiles for the recorder. The daemon's loop calls every source once per
 * interval (collect) and writes what they emit to the ring; later sources (Go heap reader, pprof
 * scraper) plug in here beside the CPU profiler.
 */
#ifndef PFR_RECORDER_SOURCE_H
#define PFR_RECORDER_SOURCE_H

#include "config.h"
#include "pfr_store.h"

/* Called by a source with the profiles it produced (all of an interval at once, so they are
 * written in one transaction); chunks[i].labels are the source's own labels (e.g.
 * container.id), the daemon adds host labels. Returns how many were written (n when all), or a
 * negative errno when none could be. */
typedef int (*pfr_emit_fn)(const pfr_chunk_in *chunks, size_t n, void *ctx);

typedef struct pfr_source_ops {
    const char *name;
    /* Produce what was gathered in [start_ns, end_ns) through emit. */
    int (*collect)(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit, void *emit_ctx);
    /* Apply the reloadable parts of a new configuration (SIGHUP). May be NULL. */
    int (*reload)(void *self, const pfr_config *cfg);
    /* Log counters (debug level) after an interval. May be NULL. */
    void (*log_stats)(void *self);
    void (*destroy)(void *self);
} pfr_source_ops;

typedef struct pfr_source {
    const pfr_source_ops *ops;
    void *self;
} pfr_source;

/* The sources that look for programs (Go heap, pprof discovery) share one /proc scan
 * (exe_scan.h): a scan made by one serves the other if it is younger than half its interval,
 * so a program started meanwhile is found up to that much later. */
#define PFR_EXES_MAX_AGE(interval_ns) ((interval_ns) / 2)

#endif
