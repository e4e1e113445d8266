/* pfr_fsguard's internals, shared by fsguard.c and fsguard_copy.c. */
#ifndef PFR_FSGUARD_INTERNAL_H
#define PFR_FSGUARD_INTERNAL_H

#include <pthread.h>

#include "pfr_disk_keep.h"
#include "pfr_fsguard.h"
#include "pfr_map.h"

#define PFR_FSGUARD_MAX_JOBS 64 /* copies in flight or not taken yet */

/* A copy being made by its worker (a child process: fsguard_copy.c). */
typedef struct pfr_fsguard_job {
    uint64_t dev, ino;
    pid_t pid;        /* the worker; 0 once reaped */
    int dst;          /* the copy, read-write: the worker writes it */
    int64_t deadline; /* monotonic: the worker's, then the finished copy's (kept until its first
                         taker comes, then a while for the other callers: the symbolizer and
                         the unwinder both) */
    bool taken;       /* a caller has had the finished copy */
    bool in_memory;   /* a memfd (no usable copy directory): kept only the short while */
    int result;       /* once the worker ended: 0 (dst is the copy) or -errno */
} pfr_fsguard_job;

struct pfr_fsguard {
    char proc_root[256];
    char copy_dir[4096]; /* "" = memfd */
    pfr_disk_keep keep;  /* the free space copies leave to the ring there */
    enum pfr_fsguard_remote remote;
    int64_t timeout_ns, avoid_ns;
    int64_t keep_ns;   /* a finished copy waits this long for its first taker */
    int64_t shared_ns; /* then this long for the others */
    size_t max_copy;
    unsigned max_stuck;
    uint64_t memfd_dev;   /* the kernel's own memory file system (memfds); 0: unknown */
    pthread_mutex_t lock; /* guards what follows */
    pfr_map cache;        /* dev -> (expiry in ms << 2 | kind) */
    pfr_map avoided;      /* dev -> until (monotonic ns) */
    pfr_fsguard_stats st;
    pfr_fsguard_job jobs[PFR_FSGUARD_MAX_JOBS]; /* copies started, not taken yet */
    size_t njobs;
    pid_t stuck[PFR_FSGUARD_MAX_JOBS]; /* abandoned workers not reaped yet */
    size_t nstuck;
};

/* Give up on the copies past their deadline (the statistics call it too). */
void pfr_fsguard_sweep(pfr_fsguard *g);
/* At the end: let go of every job (running ones are left to end by themselves). */
void pfr_fsguard_jobs_free(pfr_fsguard *g);

/* Whether dev is avoided now (an expired entry is dropped). Call with g->lock held. */
bool pfr_fsguard_avoided_locked(pfr_fsguard *g, uint64_t dev, int64_t now);

/* pfr_fsguard_path_kind, also giving the mount point (in pid's view). */
enum pfr_fs_kind pfr_fsguard_path_mount(pfr_fsguard *g, pid_t pid, const char *path, uint64_t *dev,
                                        char *mnt, size_t mntlen);

#endif
