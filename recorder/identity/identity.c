/*
 * pfr_identity's resolver: creation and options, lookups answered from the cache or from the
 * path alone, stats (pfr_identity.h). The metadata I/O is in id_worker.c.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "id_resolver.h"

#define MS 1000000ll

bool pfr_identity_k8s_configured(const pfr_identity *id)
{
    return id->k8s != NULL;
}

const char *pfr_identity_state_name(enum pfr_identity_state s)
{
    static const char *const names[] = {"none", "resolved", "pending", "failed"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* ---- creation ---- */

/* A copy of v, or of def when v is NULL; NULL when the result is "" (the source is off). */
static char *opt_dup(const char *v, const char *def, bool *ok)
{
    const char *s = v ? v : def;
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

static int64_t ms_or(int64_t v, int64_t def)
{
    return v > 0 ? v : def;
}

static int check_opts(const pfr_identity_opts *o, char *err, size_t errlen)
{
    if (o->retry_max_ms > 0 && o->retry_min_ms > o->retry_max_ms) {
        snprintf(err, errlen, "retry_min_ms is above retry_max_ms");
        return -EINVAL;
    }
    return 0;
}

static int copy_settings(pfr_identity *id, const pfr_identity_opts *o)
{
    bool ok = true;
    id->docker_socket = opt_dup(o->docker_socket, PFR_IDENTITY_DEFAULT_DOCKER_SOCKET, &ok);
    id->docker_root = opt_dup(o->docker_root, PFR_IDENTITY_DEFAULT_DOCKER_ROOT, &ok);
    id->containerd_root = opt_dup(o->containerd_root, PFR_IDENTITY_DEFAULT_CONTAINERD_ROOT, &ok);
    id->crio_root = opt_dup(o->crio_root, PFR_IDENTITY_DEFAULT_CRIO_ROOT, &ok);
    id->proc_root = opt_dup(o->proc_root, "/proc", &ok);
    id->cache_max = o->cache_max ? o->cache_max : PFR_IDENTITY_DEFAULT_CACHE_MAX;
    id->retry_min_ns = ms_or(o->retry_min_ms, 1000) * MS;
    id->retry_max_ns = ms_or(o->retry_max_ms, 60000) * MS;
    if (id->retry_min_ns > id->retry_max_ns)
        id->retry_min_ns = id->retry_max_ns;
    id->docker_timeout_ms = ms_or(o->docker_timeout_ms, 2000);
    id->k8s_min_refresh_ns = ms_or(o->k8s.min_refresh_ms, 5000) * MS;
    return ok ? 0 : -ENOMEM;
}

static void free_settings(pfr_identity *id)
{
    char **s[] = {&id->docker_socket, &id->docker_root, &id->containerd_root, &id->crio_root,
                  &id->proc_root};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        free(*s[i]);
        *s[i] = NULL;
    }
}

static int start_thread(pfr_identity *id)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc)
        return -rc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&id->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc)
        return -rc;
    rc = pthread_mutex_init(&id->mu, NULL);
    if (rc) {
        pthread_cond_destroy(&id->wake);
        return -rc;
    }
    rc = pthread_create(&id->thread, NULL, pfr_identity_worker_main, id);
    if (rc) {
        pthread_mutex_destroy(&id->mu);
        pthread_cond_destroy(&id->wake);
        return -rc;
    }
    pthread_setname_np(id->thread, "pfr-identity"); /* its CPU in /proc/PID/task */
    return 0;
}

/* After every fetch of the pod list (the client's thread): index it, count it. */
static void on_pods(void *ctx, const pfr_k8s_podlist *l, int rc, const char *err)
{
    pfr_identity *id = ctx;
    char why[256];
    if (l && (rc = pfr_identity_take_pods(id, l, why, sizeof(why))) != 0)
        err = why;
    pthread_mutex_lock(&id->mu);
    id->st.k8s_fetches++;
    if (rc) {
        id->st.k8s_failures++;
        snprintf(id->st.last_error, sizeof(id->st.last_error), "%s", err);
    }
    pthread_mutex_unlock(&id->mu);
}

/* The pod list's client: the one lent (o->pods, not started yet), or one of the resolver's own
 * when o names a list; subscribed to. */
static int k8s_client(pfr_identity *id, const pfr_identity_opts *o, char *err, size_t errlen)
{
    id->k8s = o->pods;
    if (!id->k8s && pfr_k8s_pods_configured(&o->k8s)) {
        int rc = pfr_k8s_pods_new(&o->k8s, &id->own_k8s, err, errlen);
        if (rc)
            return rc;
        id->k8s = id->own_k8s;
    }
    if (id->k8s && pfr_k8s_pods_subscribe(id->k8s, on_pods, id) != 0) {
        snprintf(err, errlen, "the pod list's client started before the resolver");
        return -EBUSY;
    }
    return 0;
}

int pfr_identity_new(const pfr_identity_opts *o, pfr_identity **out, char *err, size_t errlen)
{
    static const pfr_identity_opts defaults = {0};
    *out = NULL;
    if (errlen)
        err[0] = '\0';
    if (!o)
        o = &defaults;
    int rc = check_opts(o, err, errlen);
    if (rc)
        return rc;
    pfr_identity *id = calloc(1, sizeof(*id));
    if (!id) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    atomic_init(&id->stop, false);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = copy_settings(id, o);
    if (!rc)
        rc = k8s_client(id, o, err, errlen);
    if (!rc)
        rc = pfr_identity_cache_init(&id->cache, id->cache_max);
    if (!rc && (rc = start_thread(id)) != 0)
        snprintf(err, errlen, "cannot start the resolver's thread: %s", strerror(-rc));
    if (!rc && id->own_k8s && (rc = pfr_k8s_pods_start(id->own_k8s)) != 0) {
        snprintf(err, errlen, "cannot start the pod list's thread: %s", strerror(-rc));
        pfr_identity_free(id);
        return rc;
    }
    if (rc) {
        if (rc == -ENOMEM && errlen && !err[0])
            snprintf(err, errlen, "out of memory");
        if (id->k8s)
            pfr_k8s_pods_unsubscribe(id->k8s, on_pods, id);
        pfr_k8s_pods_free(id->own_k8s);
        pfr_identity_cache_free(&id->cache);
        free_settings(id);
        free(id);
        curl_global_cleanup();
        return rc;
    }
    *out = id;
    return 0;
}

void pfr_identity_free(pfr_identity *id)
{
    if (!id)
        return;
    if (id->k8s) /* its fetches no longer come here */
        pfr_k8s_pods_unsubscribe(id->k8s, on_pods, id);
    pthread_mutex_lock(&id->mu);
    atomic_store(&id->stop, true);
    pthread_cond_signal(&id->wake);
    pthread_mutex_unlock(&id->mu);
    if (id->k8s) /* the thread may wait for a fresher list */
        pfr_k8s_pods_wake(id->k8s);
    pthread_join(id->thread, NULL);
    pfr_k8s_pods_free(id->own_k8s);
    pthread_mutex_destroy(&id->mu);
    pthread_cond_destroy(&id->wake);
    pfr_identity_cache_free(&id->cache);
    pfr_identity_pods_free(&id->pods);
    free_settings(id);
    free(id);
    curl_global_cleanup();
}

/* ---- lookups ---- */

bool pfr_identity_enqueue(pfr_identity *id, struct id_entry *e)
{
    if (id->qlen >= id->cache_max) {
        id->st.queue_full++;
        return false;
    }
    e->queued = true;
    e->qnext = NULL;
    if (id->qtail)
        id->qtail->qnext = e;
    else
        id->qhead = e;
    id->qtail = e;
    id->qlen++;
    pthread_cond_signal(&id->wake);
    return true;
}

int pfr_identity_from_pods(pfr_identity *id, const char *rid, char *out, size_t outlen)
{
    const struct id_pod_entry *pe = pfr_identity_pods_find(&id->pods, rid);
    if (!pe)
        return 0;
    if (pfr_identity_k8s_id(pe->ns, pe->pod, pe->container, time(NULL), out, outlen) != 0)
        out[0] = '\0'; /* no id fits: none */
    return 1;
}

int pfr_identity_take_pods(pfr_identity *id, const pfr_k8s_podlist *list, char *err, size_t errlen)
{
    pthread_mutex_lock(&id->mu);
    bool newer = list->seq > id->pods_seq;
    pthread_mutex_unlock(&id->mu);
    if (!newer)
        return 0;
    struct id_pod_index ix;
    int rc = pfr_identity_pods_parse(list->json, list->len, &ix, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&id->mu);
    if (list->seq > id->pods_seq) { /* not taken by the other thread meanwhile */
        struct id_pod_index old = id->pods;
        id->pods = ix;
        id->pods_seq = list->seq;
        ix = old;
    }
    pthread_mutex_unlock(&id->mu);
    pfr_identity_pods_free(&ix);
    return 0;
}

void pfr_identity_note(pfr_identity *id, uint64_t *c, const char *err)
{
    pthread_mutex_lock(&id->mu);
    if (c)
        (*c)++;
    if (err)
        snprintf(id->st.last_error, sizeof(id->st.last_error), "%s", err);
    pthread_mutex_unlock(&id->mu);
}

static bool needs_runtime(enum pfr_identity_kind k)
{
    return k == PFR_IDENTITY_KIND_DOCKER || k == PFR_IDENTITY_KIND_CRIO ||
           k == PFR_IDENTITY_KIND_CONTAINERD;
}

/* Set e's answer to container id cid ("" = none). */
static void settle(struct id_entry *e, const char *cid)
{
    char service[PFR_IDENTITY_ID_MAX];
    if (!cid[0] || pfr_identity_service_name(cid, service, sizeof(service)) != 0 ||
        pfr_identity_entry_set_ids(e, cid, service) != 0) {
        pfr_identity_entry_set_ids(e, NULL, NULL);
        e->state = PFR_IDENTITY_NONE;
        return;
    }
    e->state = PFR_IDENTITY_RESOLVED;
}

/* A new entry's first answer, from the path and the pod list alone (mu held). */
static void first_answer(pfr_identity *id, struct id_entry *e)
{
    switch (e->cg.kind) {
    case PFR_IDENTITY_KIND_SYSTEMD:
    case PFR_IDENTITY_KIND_TALOS:
        settle(e, e->cg.id);
        return;
    case PFR_IDENTITY_KIND_SANDBOX:
        /* a gVisor sandbox has its id on its command line: the thread reads it */
        e->state = PFR_IDENTITY_NONE;
        if (e->pid > 0 && pfr_identity_enqueue(id, e))
            e->state = PFR_IDENTITY_PENDING;
        return;
    default:
        if (!needs_runtime(e->cg.kind)) {
            e->state = PFR_IDENTITY_NONE;
            return;
        }
    }
    char cid[PFR_IDENTITY_ID_MAX];
    if (e->cg.kubepods && pfr_identity_from_pods(id, e->cg.runtime_id, cid, sizeof(cid))) {
        settle(e, cid);
        return;
    }
    e->state = PFR_IDENTITY_PENDING;
    pfr_identity_enqueue(id, e);
}

/* A pod-level cgroup of kubepods named no gVisor sandbox by the command line of the pid last
 * asked: another of its processes may (the agent asks for each process until one does), at
 * most once per retry_min. */
static bool sandbox_recheck(const struct id_entry *e, int pid, int64_t now)
{
    return e->cg.kind == PFR_IDENTITY_KIND_SANDBOX && e->state == PFR_IDENTITY_NONE && !e->queued &&
           pid > 0 && pid != e->checked_pid && now >= e->next_try_ns;
}

static void answer(const struct id_entry *e, pfr_identity_result *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = e->cg.kind;
    out->state = e->state;
    memcpy(out->runtime_id, e->cg.runtime_id, sizeof(out->runtime_id));
    if (e->state == PFR_IDENTITY_RESOLVED) {
        pfr_identity_copy(out->container_id, sizeof(out->container_id), e->container_id);
        pfr_identity_copy(out->service, sizeof(out->service), e->service);
    }
}

void pfr_identity_lookup(pfr_identity *id, const char *cgroup, int pid, pfr_identity_result *out)
{
    const char *key = cgroup ? cgroup : "";
    int64_t now = pfr_clock_mono_ns();
    pthread_mutex_lock(&id->mu);
    id->st.lookups++;
    struct id_entry *e = pfr_identity_cache_get(&id->cache, key);
    if (e) {
        id->st.cache_hits++;
        if (pid > 0)
            e->pid = pid;
        if ((e->state == PFR_IDENTITY_PENDING || e->state == PFR_IDENTITY_FAILED) && !e->queued &&
            now >= e->next_try_ns)
            pfr_identity_enqueue(id, e);
        else if (sandbox_recheck(e, pid, now))
            pfr_identity_enqueue(id, e);
        answer(e, out);
        pthread_mutex_unlock(&id->mu);
        return;
    }
    pthread_mutex_unlock(&id->mu);

    /* classify outside the lock: it is the only real work of a first lookup */
    pfr_identity_cgroup cg;
    pfr_identity_classify(key, &cg);

    pthread_mutex_lock(&id->mu);
    e = pfr_identity_cache_get(&id->cache, key); /* another thread may have added it meanwhile */
    if (!e && (e = pfr_identity_cache_add(&id->cache, key, &id->st.evictions)) != NULL) {
        e->cg = cg;
        e->pid = pid > 0 ? pid : 0;
        first_answer(id, e);
    }
    if (e) {
        answer(e, out);
    } else { /* no memory for an entry: answer without one */
        memset(out, 0, sizeof(*out));
        out->kind = cg.kind;
        out->state = needs_runtime(cg.kind) ? PFR_IDENTITY_FAILED : PFR_IDENTITY_NONE;
        if (cg.kind == PFR_IDENTITY_KIND_SYSTEMD || cg.kind == PFR_IDENTITY_KIND_TALOS) {
            out->state = PFR_IDENTITY_RESOLVED;
            pfr_identity_copy(out->container_id, sizeof(out->container_id), cg.id);
            pfr_identity_service_name(cg.id, out->service, sizeof(out->service));
        }
    }
    pthread_mutex_unlock(&id->mu);
}

void pfr_identity_get_stats(pfr_identity *id, pfr_identity_stats *out)
{
    pthread_mutex_lock(&id->mu);
    *out = id->st;
    out->entries = id->cache.n;
    size_t *by_state[] = {[PFR_IDENTITY_NONE] = &out->none,
                          [PFR_IDENTITY_RESOLVED] = &out->resolved,
                          [PFR_IDENTITY_PENDING] = &out->pending,
                          [PFR_IDENTITY_FAILED] = &out->failed};
    out->resolved = out->none = out->pending = out->failed = 0;
    for (const struct id_entry *e = id->cache.head; e; e = e->next)
        (*by_state[e->state])++;
    out->k8s_containers = id->pods.n;
    pthread_mutex_unlock(&id->mu);
}
