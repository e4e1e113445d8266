/* batch: when a sink's batch is ready to go (count, bytes, age), and the bandwidth pacer. */
#ifndef PFR_SHIP_BATCH_H
#define PFR_SHIP_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_batch_limits {
    size_t max_chunks;  /* chunks per batch */
    uint64_t max_bytes; /* request bytes per batch, estimated from the ring's stored sizes (a
                           batch stops growing past it): an INSERT's size, not memory */
    int64_t max_age_ms; /* send once the oldest waiting chunk ended this long ago */
} pfr_batch_limits;

/* What is waiting after the cursor (from a metadata-only look at the ring). */
typedef struct pfr_backlog {
    size_t chunks;      /* up to max_chunks of them */
    uint64_t bytes;     /* their stored (compressed) size: an early estimate of the body */
    int64_t oldest_end; /* end of the oldest waiting chunk, unix ns */
} pfr_backlog;

/* 0 if the batch should be sent now, else the ms to wait before it will be (by age). Draining
 * (--once, backfill, a backlog of full batches) sends at once whatever is there. */
int64_t pfr_batch_wait_ms(const pfr_batch_limits *l, const pfr_backlog *b, int64_t now_ns,
                          bool draining);

/* Bandwidth cap: a token bucket of one request's depth. rate 0 = unlimited. */
typedef struct pfr_pacer {
    uint64_t rate;   /* bytes per second */
    int64_t next_ns; /* monotonic time before which the next request must not start */
} pfr_pacer;

/* ns to wait before sending now. */
int64_t pfr_pacer_wait_ns(const pfr_pacer *p, int64_t now_ns);
/* Account for bytes sent starting at start_ns. */
void pfr_pacer_sent(pfr_pacer *p, uint64_t bytes, int64_t start_ns);

#endif
