/* pfr_shared_sym: the daemon's symbolizer behind its fair lock (pfr_shared_sym.h). */
#include "pfr_shared_sym.h"

#include <errno.h>
#include <stdlib.h>

#include "pfr_membudget.h"

struct pfr_shared_sym {
    pfr_fair_lock lock; /* guards sym and the keeper's state */
    pfr_symbolizer *sym;
    size_t max_cache_bytes;          /* the bound the budget shrinks from */
    struct pfr_membudget *membudget; /* borrowed, may be NULL */
    pfr_shared_sym_keeps_fn keeps;   /* the keeper, or NULL */
    void *keeps_ctx;
};

int pfr_shared_sym_new(const pfr_sym_opts *opts, pfr_shared_sym **out)
{
    pfr_shared_sym *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return -ENOMEM;
    int rc = pfr_symbolizer_new(opts, &ss->sym);
    if (rc) {
        free(ss);
        return rc;
    }
    pfr_fair_lock_init(&ss->lock);
    ss->max_cache_bytes = opts->max_cache_bytes;
    ss->membudget = opts->membudget;
    *out = ss;
    return 0;
}

void pfr_shared_sym_free(pfr_shared_sym *ss)
{
    if (!ss)
        return;
    pfr_symbolizer_free(ss->sym);
    pfr_fair_lock_destroy(&ss->lock);
    free(ss);
}

pfr_symbolizer *pfr_shared_sym_acquire(pfr_shared_sym *ss)
{
    pfr_fair_lock_acquire(&ss->lock);
    return ss->sym;
}

void pfr_shared_sym_release(pfr_shared_sym *ss)
{
    pfr_fair_lock_release(&ss->lock);
}

pfr_fair_lock *pfr_shared_sym_lock(pfr_shared_sym *ss)
{
    return &ss->lock;
}

int pfr_shared_sym_set_keeper(pfr_shared_sym *ss, pfr_shared_sym_keeps_fn keeps, void *ctx)
{
    pfr_fair_lock_acquire(&ss->lock);
    int rc = keeps && ss->keeps ? -EBUSY : 0;
    if (rc == 0) {
        ss->keeps = keeps;
        ss->keeps_ctx = keeps ? ctx : NULL;
    }
    pfr_fair_lock_release(&ss->lock);
    return rc;
}

void pfr_shared_sym_forget(pfr_shared_sym *ss, pid_t pid)
{
    if (!ss->keeps || !ss->keeps(ss->keeps_ctx, pid))
        pfr_symbolizer_forget_process(ss->sym, pid);
}

void pfr_shared_sym_stats(pfr_shared_sym *ss, pfr_sym_stats *out)
{
    pfr_fair_lock_acquire(&ss->lock);
    pfr_symbolizer_stats(ss->sym, out);
    pfr_fair_lock_release(&ss->lock);
}

size_t pfr_shared_sym_fit(pfr_shared_sym *ss)
{
    pfr_sym_stats st;
    pfr_symbolizer_stats(ss->sym, &st);
    size_t bound =
        (size_t)pfr_membudget_cache_bound(ss->membudget, ss->max_cache_bytes, st.cache_bytes);
    pfr_symbolizer_set_bound(ss->sym, bound);
    return bound;
}
