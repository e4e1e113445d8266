/*
 * pfr_shared_sym: the recorder's one symbolizer (symbolizer.h) behind its lock, owned by the
 * daemon and lent to every source through pfr_source_env, so that every profile shares one
 * symbol cache and one memory bound.
 *
 * The lock is a fair (FIFO) lock (fair_lock.h): the CPU source's notification thread must
 * snapshot a new process within milliseconds while another thread symbolizes a whole interval,
 * and a plain mutex let one starve the other. A source that keeps state of its own beside what
 * it asks the symbolizer (the CPU source's process table) may guard it with the same lock
 * (pfr_shared_sym_lock), so that one acquisition covers both.
 *
 * Snapshots of processes (pfr_symbolizer_add_process) are shared too: a source that took one
 * for its own use drops it with pfr_shared_sym_forget, which leaves it in place while the
 * source that tracks processes (the keeper, at most one) still has the process.
 *
 * Constructor pfr_shared_sym_new, destructor pfr_shared_sym_free (after every source that
 * borrowed it is destroyed).
 */
#ifndef PFR_SHARED_SYM_H
#define PFR_SHARED_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fair_lock.h"
#include "symbolizer.h"

typedef struct pfr_shared_sym pfr_shared_sym;

/* Create the symbolizer of opts (its cache bound is opts->max_cache_bytes, the bound the memory
 * budget shrinks from: pfr_shared_sym_fit). 0, or a negative errno. */
int pfr_shared_sym_new(const pfr_sym_opts *opts, pfr_shared_sym **out);
void pfr_shared_sym_free(pfr_shared_sym *ss);

/* Take the lock and the symbolizer; use it only until release (its strings too). */
pfr_symbolizer *pfr_shared_sym_acquire(pfr_shared_sym *ss);
void pfr_shared_sym_release(pfr_shared_sym *ss);

/* The lock itself, for a source that guards its own state with it (see above) and lets
 * waiters in between steps of a long work (pfr_fair_lock_contended). */
pfr_fair_lock *pfr_shared_sym_lock(pfr_shared_sym *ss);

/* The source that tracks processes itself and forgets their snapshots after its own last use:
 * keeps(ctx, pid) says whether it still has pid (called holding the lock). One keeper; -EBUSY
 * when one is set already. Set before the other sources start, cleared (NULL) at its end. */
typedef bool (*pfr_shared_sym_keeps_fn)(void *ctx, pid_t pid);
int pfr_shared_sym_set_keeper(pfr_shared_sym *ss, pfr_shared_sym_keeps_fn keeps, void *ctx);

/* Drop pid's snapshot that the caller took, unless the keeper still has that process. Call
 * holding the lock. */
void pfr_shared_sym_forget(pfr_shared_sym *ss, pid_t pid);

/* The symbolizer's figures (its cache, files, perf maps), for its metrics: takes the lock. */
void pfr_shared_sym_stats(pfr_shared_sym *ss, pfr_sym_stats *out);

/* Bound the symbol cache by the recorder's memory budget (pfr_membudget_cache_bound: its bound
 * from the options, less near or over the budget) and return that bound. Call holding the
 * lock, once an interval (the CPU source does, and bounds its frame cache by it). */
size_t pfr_shared_sym_fit(pfr_shared_sym *ss);

#endif
