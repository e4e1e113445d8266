/*
 * The resolver object shared by identity.c (creation, lookups, stats) and id_worker.c (its
 * thread: the metadata I/O). Fields under "mu" are read and written with mu held; fields marked
 * "worker" belong to the resolver's thread alone.
 */
#ifndef PFR_ID_RESOLVER_H
#define PFR_ID_RESOLVER_H

#include <pthread.h>
#include <stdatomic.h>

#include "id_internal.h"
#include "pfr_clock.h"
#include "pfr_k8s_pods.h"

/* Attempts answered PENDING before an entry turns FAILED; until then the thread retries it by
 * itself, afterwards only a lookup past its backoff queues it again. */
#define ID_PENDING_ATTEMPTS 3
/* After a failed connect to Docker's socket, go straight to the disk for this long. */
#define ID_DOCKER_SOCKET_PAUSE_NS (30ll * 1000000000ll)
/* Body caps. */
#define ID_DOCKER_MAX_BODY  (4u << 20)
#define ID_OCI_MAX_BODY     (4u << 20)
#define ID_ENVIRON_MAX_BODY (1u << 20)
#define ID_CMDLINE_MAX_BODY (64u << 10)

struct pfr_identity {
    /* settings (owned copies; NULL = that source is off) */
    char *docker_socket, *docker_root, *containerd_root, *crio_root;
    char *proc_root;
    size_t cache_max;
    int64_t retry_min_ns, retry_max_ns, docker_timeout_ms;
    int64_t k8s_min_refresh_ns; /* a runtime id missing from the list asks a list this fresh */
    /* the pod list's client (pfr_k8s_pods.h): borrowed (opts.pods) or own_k8s; NULL = none */
    pfr_k8s_pods *k8s, *own_k8s;

    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread's: work queued or stop (CLOCK_MONOTONIC) */
    pthread_t thread;
    atomic_bool stop;

    struct id_cache cache;          /* mu */
    struct id_entry *qhead, *qtail; /* mu: entries to work on now */
    struct id_entry *delayed;       /* mu: PENDING entries waiting for their retry time */
    size_t qlen;                    /* mu: both lists */
    struct id_pod_index pods;       /* mu: replaced whole when a newer list comes */
    uint64_t pods_seq;              /* mu: the seq of the list pods indexes (0 = none) */
    pfr_identity_stats st;          /* mu: counters (the per-state ones are computed) */

    int64_t docker_socket_ok_ns; /* worker: do not use the socket before this */
};

/* Whether a pod list source is configured. */
bool pfr_identity_k8s_configured(const pfr_identity *id);
/* Append e to the work queue (mu held); false (and not queued) if the queue is full. */
bool pfr_identity_enqueue(pfr_identity *id, struct id_entry *e);
/* An id of a runtime container from the pod list (mu held): 1 = found (out is the id, possibly
 * "" for none), 0 = not in the list. */
int pfr_identity_from_pods(pfr_identity *id, const char *rid, char *out, size_t outlen);
/* Index list when it is newer than the one indexed (mu not held; parses without it). 0 or the
 * parser's error, with a reason in err. */
int pfr_identity_take_pods(pfr_identity *id, const pfr_k8s_podlist *list, char *err, size_t errlen);
/* Count c and remember err as the last error (mu not held). */
void pfr_identity_note(pfr_identity *id, uint64_t *c, const char *err);

/* The resolver's thread (id_worker.c). */
void *pfr_identity_worker_main(void *arg);

#endif
