/* pfr_fsguard's internals, shared by fsguard.c and fsguard_copy.c. */
#ifndef PFR_FSGUARD_INTERNAL_H
#define PFR_FSGUARD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "pfr_fsguard.h"
#include "pfr_map.h"

/* Workers blocked past their deadline, counted by the guard (when it gives up on one) and by
 * the worker (when it ends at last): shared by both, freed by whichever lets go last. */
typedef struct pfr_fsguard_stuck {
    atomic_uint n;    /* workers blocked now */
    atomic_uint refs; /* the guard + each worker */
} pfr_fsguard_stuck;

void pfr_fsguard_stuck_unref(pfr_fsguard_stuck *s);

struct pfr_fsguard {
    char proc_root[256];
    char copy_dir[4096]; /* "" = memfd */
    enum pfr_fsguard_remote remote;
    int64_t timeout_ns, avoid_ns;
    size_t max_copy;
    unsigned max_stuck;
    pthread_mutex_t lock; /* guards what follows */
    pfr_map cache;        /* dev -> (expiry in ms << 2 | kind) */
    pfr_map avoided;      /* dev -> until (monotonic ns) */
    pfr_fsguard_stats st;
    pfr_fsguard_stuck *stuck;
};

/* Whether dev is avoided now (an expired entry is dropped). Call with g->lock held. */
bool pfr_fsguard_avoided_locked(pfr_fsguard *g, uint64_t dev, int64_t now);

/* pfr_fsguard_path_kind, also giving the mount point (in pid's view). */
enum pfr_fs_kind pfr_fsguard_path_mount(pfr_fsguard *g, pid_t pid, const char *path, uint64_t *dev,
                                        char *mnt, size_t mntlen);

#endif
