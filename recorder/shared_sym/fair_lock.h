/* fair_lock: a FIFO (ticket) lock. The recorder's notification thread and its interval work
 * share the symbolizer; a plain mutex let one of them starve the other under a storm of new
 * processes. */
#ifndef PFR_RECORDER_FAIR_LOCK_H
#define PFR_RECORDER_FAIR_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pfr_fair_lock {
    pthread_mutex_t m;
    pthread_cond_t c;
    uint64_t next, serving;
} pfr_fair_lock;

void pfr_fair_lock_init(pfr_fair_lock *l);
void pfr_fair_lock_destroy(pfr_fair_lock *l);
void pfr_fair_lock_acquire(pfr_fair_lock *l);
void pfr_fair_lock_release(pfr_fair_lock *l);
/* True if someone is queued behind the holder (the holder may then let them go first). */
bool pfr_fair_lock_contended(pfr_fair_lock *l);

#endif
