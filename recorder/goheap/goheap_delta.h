/*
 * goheap_delta: turns two walks of one process's bucket list into per-interval values.
 *
 * The runtime's counters are cumulative since the process started and count samples, not
 * allocations. For each bucket (keyed by its address) we keep the last allocs/alloc_bytes and
 * report the difference; a bucket that is new, or whose identity (hash, size, depth) changed, or
 * whose counters went backwards (the address now belongs to another incarnation) counts from
 * zero. Values are then scaled to estimates of the true totals exactly as Go's runtime/pprof
 * does it (scaleHeapSample): with s = bytes/count the bucket's average object size and r the
 * MemProfileRate, an object of size s is sampled with probability 1 - exp(-s/r), so count and
 * bytes are multiplied by 1 / (1 - exp(-s/r)). Rates <= 1 mean "every allocation" or unknown and
 * are not scaled.
 */
#ifndef PFR_GOHEAP_DELTA_H
#define PFR_GOHEAP_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goheap_walk.h"

/* Go's scaleHeapSample, truncating to integers as it does. */
void pfr_goheap_scale(uint64_t count, uint64_t bytes, int64_t rate, int64_t *out_count,
                      int64_t *out_bytes);

/* Scaled values of one bucket: alloc_* over the interval, inuse_* now. */
typedef struct pfr_goheap_values {
    int64_t alloc_objects, alloc_bytes, inuse_objects, inuse_bytes;
} pfr_goheap_values;

typedef struct pfr_goheap_totals {
    int64_t alloc_objects, alloc_bytes; /* scaled, since the process started */
    int64_t inuse_objects, inuse_bytes; /* scaled, now */
    int64_t delta_objects, delta_bytes; /* scaled, this interval */
    size_t new_buckets, reset_buckets;  /* buckets counted from zero */
} pfr_goheap_totals;

/* Per-process state: the previous counters of every bucket. Zero-initialise. */
typedef struct pfr_goheap_delta {
    struct pfr_goheap_prev {
        uint64_t addr, hash, size, nstk, allocs, alloc_bytes;
    } * prev;
    size_t nprev, cap_prev;
    uint32_t *index; /* open addressing: 1 + position in prev, 0 = empty */
    size_t index_cap;
    bool primed; /* a previous walk is stored */
} pfr_goheap_delta;

/* Compute the values of every bucket of w into vals (w->nbuckets entries) and remember w's
 * counters for next time. When d is not primed the interval's allocations are unknown: with
 * from_zero (the process started, or had sampling switched on, during the interval) the whole
 * counters are the interval's; otherwise alloc values are 0 (a baseline). Returns 0 or -ENOMEM
 * (d is then left as it was). */
int pfr_goheap_delta_update(pfr_goheap_delta *d, const pfr_goheap_walk *w, int64_t rate,
                            bool from_zero, pfr_goheap_values *vals, pfr_goheap_totals *totals);
/* Forget everything (the process restarted); the next update is unprimed. */
void pfr_goheap_delta_reset(pfr_goheap_delta *d);
void pfr_goheap_delta_free(pfr_goheap_delta *d);

#endif
