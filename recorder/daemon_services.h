/*
 * daemon_services: what every source shares, owned by the daemon (its top level, main.c) and
 * lent to the sources through pfr_source_env (source.h):
 *   - the file system guard (recorder/fsguard) and the memory budget (recorder/membudget);
 *   - the Kubernetes pod list's client (recorder/identity/pfr_k8s_pods.h): one fetch timer for
 *     the identities' resolver and pprof discovery;
 *   - the identities' resolver (recorder/identity): Coroot's container.id and service.name;
 *   - the /proc scan of executables (recorder/exe_scan) the sources that look for programs share;
 *   - the symbolizer, behind its lock (recorder/shared_sym).
 * Started in that order before the first source (the pod list's thread once the resolver has
 * subscribed to its fetches), stopped in the reverse order after the last source is destroyed
 * (each later one may use the earlier ones: the symbolizer copies remote files through the
 * guard and asks the budget, the resolver reads the pod list).
 */
#ifndef PFR_RECORDER_DAEMON_SERVICES_H
#define PFR_RECORDER_DAEMON_SERVICES_H

#include "config.h"
#include "daemon_metrics.h"
#include "pfr_disk_keep.h"
#include "source.h"

typedef struct pfr_daemon_services {
    struct pfr_fsguard *fsguard;     /* never NULL once started */
    struct pfr_membudget *membudget; /* never NULL once started (a budget of 0 allows all) */
    struct pfr_k8s_pods *k8s_pods;   /* NULL: no pod list configured, or it could not start */
    struct pfr_identity *identity;   /* NULL: processes named from their cgroup paths alone */
    struct pfr_exe_scan *exes;       /* NULL (out of memory): each source scans on its own */
    struct pfr_shared_sym *sym;      /* never NULL once started */
    /* The free space the recorder's own files beside the ring (the unwind cache, copies of
     * remote files) leave to it; the fsguard points to it, so s must not move once started. */
    pfr_disk_keep disk_keep;
} pfr_daemon_services;

/* Start them all into s (zeroed first). A service the recorder can do without (identities,
 * the shared scan, the pod list) that cannot start is logged, counted as an error of its name in
 * metrics, and left NULL. Returns 0, or a negative errno with a reason in err (nothing left
 * running). */
int pfr_daemon_services_start(const pfr_config *cfg, pfr_daemon_metrics *metrics,
                              pfr_daemon_services *s, char *err, size_t errlen);

/* Lend them to the sources: env's fields of the same names. */
void pfr_daemon_services_lend(const pfr_daemon_services *s, pfr_source_env *env);

/* Publish the figures of the services the daemon owns for every source: the symbol cache's
 * (pfr_daemon_symbolizer_metrics), right whichever sources use the symbolizer. May wait for
 * the symbolizer's lock. */
void pfr_daemon_services_publish(const pfr_daemon_services *s, pfr_daemon_metrics *metrics);

/* Stop and free them, after every source that borrowed them is destroyed. */
void pfr_daemon_services_stop(pfr_daemon_services *s);

#endif
