/*
 * collector: runs one source's collect on a thread of its own, so that the daemon's main thread
 * (signals, the interval timer, writing the ring, the store's metrics) never opens or reads a
 * file of another process, and a source stuck in the kernel (a hung FUSE or NFS mount, a
 * process's memory backed by one) delays only its own profiles.
 *
 * What a source emits is handed to the main thread synchronously: the collector's thread waits
 * in emit until the main thread has written the chunks (pfr_collector_serve), so the chunks
 * stay the source's own memory and are written by the ring's single writer. A collection that
 * is still running when the next interval ends is not queued behind: that interval is folded
 * into the next collection (the source's counts cover the whole time since its last one).
 *
 * Threads: pfr_collector_post/serve/busy/stop are for the main thread only. The collector calls
 * the source's collect, log_stats and stats on its own thread, and publishes the stats through
 * the descriptor's metric tables there; nothing else of the source runs there.
 *
 * Constructor pfr_collector_start, destructor pfr_collector_stop (which may leave a stuck thread
 * behind: see there).
 */
#ifndef PFR_RECORDER_COLLECTOR_H
#define PFR_RECORDER_COLLECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "source.h"

typedef struct pfr_collector pfr_collector;

/* A source not due is still collected this often: its counters are published after each. */
#define PFR_COLLECT_AT_LEAST_NS (60 * 1000000000LL)

typedef struct pfr_collector_stats {
    uint64_t collections;   /* collections finished */
    uint64_t folded;        /* intervals folded into a later collection: it was still running */
    uint64_t not_due;       /* intervals the source had no work for (its due): left to the next */
    uint64_t last_ns;       /* how long the last finished collection took */
    int64_t running_for_ns; /* how long the one running now has run, 0 when idle */
} pfr_collector_stats;

/* Start src's collector thread (named "pfr-<source>"), whose first collection will start at
 * start_ns. It writes 1 to wake_fd (an eventfd the
 * main thread polls) whenever it has chunks to hand over or has finished a collection.
 * metrics: where the source's counters are published (may be NULL), through the tables of
 * src->desc. The source, the metrics and wake_fd must outlive the collector. @return 0 or a
 * negative errno. */
int pfr_collector_start(const pfr_source *src, int64_t start_ns, int wake_fd,
                        pfr_daemon_metrics *metrics, pfr_collector **out);

/* Ask for the collection of [pfr_collector_next_start(c), end_ns); unless always, only if the
 * source has work for it (its due) or its last collection ended PFR_COLLECT_AT_LEAST_NS before
 * end_ns: else nothing is posted (counted in stats.not_due) and the next collection covers the
 * time. @return 0, or -EBUSY when the previous collection is still running: the interval is
 * then folded into the next one, which starts where the last posted one ended (counted in
 * stats.folded). */
int pfr_collector_post(pfr_collector *c, int64_t end_ns, bool always);

/* Hand a pending emit (if any) to write and wake the collector with its result. Also takes
 * note of a finished collection. @return true if the collector has no collection running. */
bool pfr_collector_serve(pfr_collector *c, pfr_emit_fn write, void *write_ctx);

bool pfr_collector_busy(pfr_collector *c);
/* Where the next collection starts: the end of the last one posted (not folded, not left for
 * want of work). */
int64_t pfr_collector_next_start(const pfr_collector *c);
void pfr_collector_stats_get(pfr_collector *c, pfr_collector_stats *st);
const char *pfr_collector_name(const pfr_collector *c);

/* Stop the thread: waits up to timeout_ns for a running collection to end (answering its emits
 * with -ECANCELED). @return 0 when the thread ended and was joined (the collector is freed), or
 * -ETIMEDOUT when it is stuck in a collection: it is then left running, detached, with the
 * collector's memory (the process is about to exit; the source must not be destroyed). */
int pfr_collector_stop(pfr_collector *c, int64_t timeout_ns);

#endif
