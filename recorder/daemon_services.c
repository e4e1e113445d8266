/* The services the daemon owns and lends to every source (daemon_services.h). */
#include "daemon_services.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exe_scan.h"
#include "pfr_fsguard.h"
#include "pfr_identity.h"
#include "pfr_k8s_pods.h"
#include "pfr_log.h"
#include "pfr_membudget.h"
#include "pfr_shared_sym.h"
#include "pfr_store.h"

/* The ring's reserve setting, as the store takes it. */
static pfr_store_reserve store_reserve(const pfr_config *cfg)
{
    return (pfr_store_reserve){.mode = (enum pfr_store_reserve_mode)cfg->disk_reserve.mode,
                               .bytes = cfg->disk_reserve.bytes,
                               .percent = cfg->disk_reserve.percent};
}

/* The free space the recorder's own files beside the ring leave to it: its reserve, resolved on
 * its file system as the store resolves it, and its cap. Measured once at start: the file
 * system under a ring does not change while it runs. */
static void disk_keep_of(const pfr_config *cfg, pfr_disk_keep *keep)
{
    uint64_t fs_bytes = 0;
    *keep = (pfr_disk_keep){.ring_cap = cfg->max_store_bytes};
    pfr_disk_keep_find_ring(keep, cfg->store_path, &fs_bytes);
    pfr_store_reserve r = store_reserve(cfg);
    keep->ring_reserve = fs_bytes ? pfr_store_reserve_bytes(&r, fs_bytes) : 0;
}

/* The guard of other processes' files on remote file systems; copies go beside the ring (an
 * unlinked file: page cache, not the recorder's own memory), within what keep leaves free. */
static int fsguard_new(const pfr_config *cfg, const pfr_disk_keep *keep, struct pfr_fsguard **out)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", cfg->store_path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
    pfr_fsguard_opts o = {.remote = (enum pfr_fsguard_remote)cfg->remote_files,
                          .timeout_ns = cfg->remote_file_timeout_ns,
                          .max_copy_bytes = cfg->remote_file_max_bytes,
                          .copy_dir = dir,
                          .copy_keep = keep};
    return pfr_fsguard_new(&o, out);
}

/* The budget of the resident set; a sanitized build (whose shadow memory and quarantine are
 * most of its resident set) has none. */
static uint64_t memory_budget(const pfr_config *cfg)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)cfg;
    return 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    (void)cfg;
    return 0;
#else
    return cfg->memory_budget;
#endif
#else
    return cfg->memory_budget;
#endif
}

/* The pod list's client, when the configuration names a kubelet or an API server (not started:
 * the resolver subscribes first). */
static int k8s_pods_new(const pfr_config *cfg, struct pfr_k8s_pods **out, char *err, size_t errlen)
{
    /* a list a scrape round or a missing runtime id asks for: at most every 5 s (the default) */
    pfr_k8s_pods_opts o = {
        .kubelet_url = cfg->k8s_kubelet_url,
        .apiserver_url = cfg->k8s_apiserver_url,
        .node_name = cfg->k8s_node_name,
        .token_file = cfg->k8s_token_file,
        .ca_file = cfg->k8s_ca_file,
        .insecure = cfg->k8s_insecure,
    };
    *out = NULL;
    return pfr_k8s_pods_configured(&o) ? pfr_k8s_pods_new(&o, out, err, errlen) : 0;
}

/* The resolver of Coroot identities, with the metadata sources the configuration gives. */
static int identity_new(const pfr_config *cfg, struct pfr_k8s_pods *pods, struct pfr_identity **out,
                        char *err, size_t errlen)
{
    const char *sock = cfg->docker_socket;
    pfr_identity_opts o = {
        .docker_socket = sock && strcmp(sock, "off") == 0 ? "" : sock,
        .docker_root = cfg->docker_root,
        .pods = pods,
    };
    return pfr_identity_new(&o, out, err, errlen);
}

/* The symbolizer every source shares; the CPU source reads the kernel's symbols into it. */
static int shared_sym_new(const pfr_config *cfg, pfr_daemon_services *s, char *err, size_t errlen)
{
    pfr_sym_opts so = {
        .max_cache_bytes = cfg->sym_cache_bytes,
        .proc_root = "/proc",
        .no_dwarf = !cfg->dwarf,
        .no_perf_maps = !cfg->perf_maps,
        .fsguard = s->fsguard,
        .membudget = s->membudget,
    };
    int rc = pfr_shared_sym_new(&so, &s->sym);
    if (rc)
        snprintf(err, errlen, "cannot create the symbolizer: %s", strerror(-rc));
    return rc;
}

int pfr_daemon_services_start(const pfr_config *cfg, pfr_daemon_metrics *metrics,
                              pfr_daemon_services *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    disk_keep_of(cfg, &s->disk_keep);
    int rc = fsguard_new(cfg, &s->disk_keep, &s->fsguard);
    if (rc == 0)
        rc = pfr_membudget_new(memory_budget(cfg), NULL, &s->membudget);
    if (rc) {
        snprintf(err, errlen, "cannot set up the file system guard or the memory budget: %s",
                 strerror(-rc));
        pfr_daemon_services_stop(s);
        return rc;
    }
    /* Without it (bad options) neither are pods named nor annotated pods scraped. */
    char why[512];
    if (k8s_pods_new(cfg, &s->k8s_pods, why, sizeof(why))) {
        pfr_err("kubernetes: %s; no pod list: pods are named by their runtime ids and not "
                "scraped",
                why);
        pfr_daemon_metrics_error(metrics, "kubernetes", why);
    }
    /* Without it (bad options, no memory) processes are named from their cgroup paths alone. */
    if (identity_new(cfg, s->k8s_pods, &s->identity, why, sizeof(why))) {
        s->identity = NULL;
        pfr_err("identities: %s; containers are named by their runtime ids", why);
        pfr_daemon_metrics_error(metrics, "identity", why);
    }
    if (s->k8s_pods && (rc = pfr_k8s_pods_start(s->k8s_pods)) != 0) {
        pfr_err("kubernetes: cannot start the pod list's thread: %s", strerror(-rc));
        pfr_daemon_metrics_error(metrics, "kubernetes", strerror(-rc));
        pfr_identity_free(s->identity); /* it would wait for lists that never come */
        s->identity = NULL;
        pfr_k8s_pods_free(s->k8s_pods);
        s->k8s_pods = NULL;
    }
    /* one /proc scan for the sources that look for programs; without it (out of memory) each
     * scans on its own */
    if (pfr_exe_scan_new("/proc", &s->exes))
        s->exes = NULL;
    rc = shared_sym_new(cfg, s, err, errlen);
    if (rc)
        pfr_daemon_services_stop(s);
    return rc;
}

void pfr_daemon_services_lend(const pfr_daemon_services *s, pfr_source_env *env)
{
    env->fsguard = s->fsguard;
    env->membudget = s->membudget;
    env->k8s_pods = s->k8s_pods;
    env->identity = s->identity;
    env->exes = s->exes;
    env->sym = s->sym;
    env->disk_keep = &s->disk_keep;
}

void pfr_daemon_services_stop(pfr_daemon_services *s)
{
    pfr_shared_sym_free(s->sym);
    pfr_exe_scan_free(s->exes);
    pfr_identity_free(s->identity); /* after the sources: they look identities up */
    pfr_k8s_pods_free(s->k8s_pods); /* after its consumers */
    pfr_fsguard_free(s->fsguard);
    pfr_membudget_free(s->membudget);
    memset(s, 0, sizeof(*s));
}

void pfr_daemon_services_publish(const pfr_daemon_services *s, pfr_daemon_metrics *metrics)
{
    if (!s->sym)
        return;
    pfr_sym_stats st;
    pfr_shared_sym_stats(s->sym, &st);
    pfr_daemon_metrics_publish(metrics, &pfr_daemon_symbolizer_metrics, &st, NULL);
}
