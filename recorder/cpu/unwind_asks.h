/*
 * unwind_asks: hands the sampler's requests for unwind tables (struct pfr_unwind_req, from the
 * BPF ring unwind_asks) to the unwinder, on a thread that does nothing else.
 *
 * Why a ring and a thread of their own: in the notifications' ring a request waited behind the
 * process notifications before it (each a snapshot of a process's mappings, and a turn at the
 * lock the interval's drain holds): 0.2-1 s on a host starting many processes, while the new
 * program's stacks stayed cut ("[unknown];hot_leaf" in recorder_unwind). A request costs the
 * unwinder's queue a push, so this thread answers within a wake-up.
 */
#ifndef PFR_RECORDER_UNWIND_ASKS_H
#define PFR_RECORDER_UNWIND_ASKS_H

#include "unwinder.h"

typedef struct pfr_unwind_asks pfr_unwind_asks;

/* Start reading the ring at ring_fd (a BPF ring buffer of struct pfr_unwind_req) into u.
 * 0, or -errno with err filled. */
int pfr_unwind_asks_start(int ring_fd, pfr_unwinder *u, pfr_unwind_asks **out, char *err,
                          size_t errlen);

/* Wait (up to timeout_ms) until every request in the ring when called is handed to the
 * unwinder: pfr_unwinder_sync() after it waits for their tables too. */
void pfr_unwind_asks_flush(pfr_unwind_asks *a, int timeout_ms);

/* Stop the thread and free (NULL: nothing). */
void pfr_unwind_asks_stop(pfr_unwind_asks *a);

#endif
