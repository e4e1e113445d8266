/*
 * The resolver's thread: works the queue of cgroups whose metadata is missing (asking the pod
 * list's client for a fresher list when a runtime id is missing from it: pfr_k8s_pods.h fetches
 * it), trying each source in the order that gives the node agent's answer:
 *   Kubernetes (kubepods paths): pod list, then Docker's labels (dockershim), then the OCI
 *     config of containerd or CRI-O;
 *   Docker (other paths): the socket, then config.v2.json, then Nomad's env from environ.
 * No lock is held during I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "id_resolver.h"

#define ERRLEN 256

/* What the thread needs of a queued entry, copied under the lock. */
struct job {
    pfr_identity_cgroup cg; /* the classification */
    int pid;                /* a process of the cgroup (0 = none known) */
};

/* ---- the pod list ---- */

/* The id of a runtime container from the pod list, asking for a fresher list once if the id is
 * missing. 1 = found (cid set, "" = none), 0 = not there. */
static int from_pods(pfr_identity *id, const char *rid, char *cid)
{
    if (!pfr_identity_k8s_configured(id))
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        pthread_mutex_lock(&id->mu);
        int found = pfr_identity_from_pods(id, rid, cid, PFR_IDENTITY_ID_MAX);
        pthread_mutex_unlock(&id->mu);
        if (found)
            return 1;
        if (pass == 1)
            break;
        /* a fetch asked for unless one began within k8s_min_refresh_ns, and waited for */
        char err[ERRLEN];
        pfr_k8s_podlist *l =
            pfr_k8s_pods_get(id->k8s, id->k8s_min_refresh_ns, &id->stop, NULL, NULL, 0);
        if (l)
            pfr_identity_take_pods(id, l, err, sizeof(err)); /* its error: counted when fetched */
        pfr_k8s_podlist_unref(l);
    }
    return 0;
}

/* ---- Docker ---- */

static int docker_socket(pfr_identity *id, const char *rid, struct id_meta *m, char *err)
{
    char url[128];
    pfr_identity_fmt(url, sizeof(url), "http://localhost/containers/%s/json", rid);
    struct id_http_req rq = {
        .url = url,
        .unix_socket = id->docker_socket,
        .timeout_ms = id->docker_timeout_ms,
        .max_body = ID_DOCKER_MAX_BODY,
        .stop = &id->stop,
    };
    char *body = NULL, why[ERRLEN - 64];
    size_t len = 0;
    int rc = pfr_identity_http_get(&rq, &body, &len, why, sizeof(why));
    if (!rc)
        rc = pfr_identity_docker_parse(body, len, m, why, sizeof(why));
    free(body);
    if (rc) {
        snprintf(err, ERRLEN, "docker inspect %.12s: %s", rid, why);
        /* no connection (EACCES for an unprivileged recorder) or a hung daemon: use the disk
         * for a while rather than pay for the socket at every container */
        if (rc == -ENOTCONN || rc == -ETIMEDOUT)
            id->docker_socket_ok_ns = pfr_clock_mono_ns() + ID_DOCKER_SOCKET_PAUSE_NS;
    }
    return rc;
}

/* Read and parse one JSON file with parse(); 0 or a negative errno with a reason in err. */
static int json_file(const char *path, size_t max,
                     int (*parse)(const char *, size_t, struct id_meta *, char *, size_t),
                     struct id_meta *m, char *err)
{
    char *body = NULL, why[ERRLEN - 64] = "";
    size_t len = 0;
    int rc = pfr_identity_read_file(path, max, &body, &len);
    if (rc)
        snprintf(why, sizeof(why), "%s", strerror(-rc));
    else
        rc = parse(body, len, m, why, sizeof(why));
    free(body);
    if (rc < 0)
        snprintf(err, ERRLEN, "%.120s: %s", path, why);
    return rc;
}

/* Docker's metadata of rid: 1 = m filled, 0 = not had (err says why). */
static int docker_meta(pfr_identity *id, const char *rid, struct id_meta *m, char *err)
{
    if (id->docker_socket && pfr_clock_mono_ns() >= id->docker_socket_ok_ns) {
        int rc = docker_socket(id, rid, m, err);
        pfr_identity_note(id, &id->st.docker_fetches, NULL);
        if (!rc)
            return 1;
        pfr_identity_note(id, &id->st.docker_failures, err);
    }
    if (!id->docker_root)
        return 0;
    char path[4096];
    if (pfr_identity_fmt(path, sizeof(path), "%s/containers/%s/config.v2.json", id->docker_root,
                         rid))
        return 0;
    int rc = json_file(path, ID_DOCKER_MAX_BODY, pfr_identity_docker_parse, m, err);
    pfr_identity_note(id, &id->st.docker_disk_reads, NULL);
    if (!rc)
        return 1;
    pfr_identity_note(id, &id->st.docker_disk_failures, err);
    return 0;
}

/* ---- CRI runtimes' OCI configs ---- */

static int oci_meta(pfr_identity *id, const char *rid, struct id_meta *m, char *err)
{
    const char *roots[2] = {id->containerd_root, id->crio_root};
    static const char *const fmts[2] = {"%s/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
                                        "%s/overlay-containers/%s/userdata/config.json"};
    for (int i = 0; i < 2; i++) {
        char path[4096];
        if (!roots[i] || pfr_identity_fmt(path, sizeof(path), fmts[i], roots[i], rid) != 0)
            continue;
        if (json_file(path, ID_OCI_MAX_BODY, pfr_identity_oci_parse, m, err) == 1) {
            pfr_identity_note(id, &id->st.oci_reads, NULL);
            return 1;
        }
    }
    return 0;
}

/* ---- Nomad's environment ---- */

static int environ_meta(pfr_identity *id, int pid, struct id_meta *m)
{
    if (pid <= 0 || !id->proc_root)
        return 0;
    char path[4096], *buf = NULL;
    size_t len = 0;
    if (pfr_identity_fmt(path, sizeof(path), "%s/%d/environ", id->proc_root, pid) != 0 ||
        pfr_identity_read_file(path, ID_ENVIRON_MAX_BODY, &buf, &len) != 0)
        return 0;
    memset(m, 0, sizeof(*m));
    pfr_identity_meta_environ(m, buf, len);
    free(buf);
    pfr_identity_note(id, &id->st.environ_reads, NULL);
    /* only a whole Nomad task counts: anything less says nothing about the container */
    char nid[PFR_IDENTITY_ID_MAX];
    return pfr_identity_nomad_id(m->nomad_alloc, m->nomad_group, m->nomad_job, m->nomad_ns,
                                 m->nomad_task, nid, sizeof(nid)) == 1;
}

/* ---- gVisor sandboxes ---- */

/* The runtime id a gVisor sandbox's process names on its command line: 1 = rid set, 0 = the
 * process is no sandbox (or gone). */
static int gvisor_rid(pfr_identity *id, int pid, char *rid)
{
    if (pid <= 0 || !id->proc_root)
        return 0;
    char path[4096], *buf = NULL;
    size_t len = 0;
    if (pfr_identity_fmt(path, sizeof(path), "%s/%d/cmdline", id->proc_root, pid) != 0 ||
        pfr_identity_read_file(path, ID_CMDLINE_MAX_BODY, &buf, &len) != 0)
        return 0;
    bool ok = pfr_identity_gvisor_rid(buf, len, rid);
    free(buf);
    return ok;
}

/* A sandbox's metadata: the agent asks Docker, then containerd, about the sandbox's id, and
 * names it "sandbox" in its pod. 1 = cid is the answer, 0 = retry later. */
static int resolve_sandbox(pfr_identity *id, const struct job *j, struct id_meta *m, char *cid,
                           char *err, bool *not_sandbox)
{
    char rid[PFR_IDENTITY_RUNTIME_ID_LEN + 1];
    if (!gvisor_rid(id, j->pid, rid)) {
        *not_sandbox = true;
        return 1; /* cid "": none, for this process */
    }
    if (!docker_meta(id, rid, m, err) && !oci_meta(id, rid, m, err)) {
        if (!err[0])
            snprintf(err, ERRLEN, "gVisor sandbox %.12s: no metadata", rid);
        return 0;
    }
    if (m->pod[0])
        snprintf(m->container, sizeof(m->container), "%s", PFR_IDENTITY_SANDBOX_NAME);
    if (pfr_identity_calc(m, time(NULL), cid, PFR_IDENTITY_ID_MAX) != 0)
        cid[0] = '\0';
    return 1;
}

/* ---- one job ---- */

/* 1 = cid is the answer ("" = none), 0 = metadata not had: retry later (err says why). */
static int resolve(pfr_identity *id, const struct job *j, char *cid, char *err, bool *not_sandbox)
{
    const char *rid = j->cg.runtime_id;
    struct id_meta *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, ERRLEN, "out of memory");
        return 0;
    }
    int found = 0;
    if (j->cg.kind == PFR_IDENTITY_KIND_SANDBOX) {
        found = resolve_sandbox(id, j, m, cid, err, not_sandbox);
        free(m);
        return found;
    }
    if (j->cg.kubepods) {
        if (from_pods(id, rid, cid)) {
            free(m);
            return 1;
        }
        found = (j->cg.kind == PFR_IDENTITY_KIND_DOCKER && docker_meta(id, rid, m, err)) ||
                oci_meta(id, rid, m, err);
        if (!found && !err[0])
            snprintf(err, ERRLEN, "%.12s: not in the pod list", rid);
    } else {
        found = docker_meta(id, rid, m, err) || environ_meta(id, j->pid, m);
    }
    if (found && pfr_identity_calc(m, time(NULL), cid, PFR_IDENTITY_ID_MAX) != 0)
        cid[0] = '\0'; /* an id too long for any buffer: none */
    free(m);
    return found;
}

static int64_t backoff_ns(const pfr_identity *id, unsigned attempts)
{
    int64_t b = id->retry_min_ns;
    for (unsigned i = 1; i < attempts && b < id->retry_max_ns; i++)
        b *= 2;
    return b < id->retry_max_ns ? b : id->retry_max_ns;
}

/* Record a job's outcome in its entry (mu held). */
static void apply(pfr_identity *id, struct id_entry *e, int found, const char *cid, const char *err)
{
    e->queued = false;
    if (found) {
        char service[PFR_IDENTITY_ID_MAX];
        e->attempts = 0;
        if (cid[0] && pfr_identity_service_name(cid, service, sizeof(service)) == 0 &&
            pfr_identity_entry_set_ids(e, cid, service) == 0) {
            e->state = PFR_IDENTITY_RESOLVED;
        } else {
            pfr_identity_entry_set_ids(e, NULL, NULL);
            e->state = PFR_IDENTITY_NONE;
        }
        return;
    }
    e->attempts++;
    e->next_try_ns = pfr_clock_mono_ns() + backoff_ns(id, e->attempts);
    if (err[0])
        snprintf(id->st.last_error, sizeof(id->st.last_error), "%s", err);
    if (e->attempts < ID_PENDING_ATTEMPTS) {
        e->state = PFR_IDENTITY_PENDING;
        e->queued = true; /* the thread retries it by itself */
        e->qnext = id->delayed;
        id->delayed = e;
        id->qlen++;
    } else {
        e->state = PFR_IDENTITY_FAILED;
    }
}

/* Move the delayed entries whose time has come to the queue; the earliest time left. */
static int64_t promote_delayed(pfr_identity *id, int64_t now)
{
    int64_t earliest = INT64_MAX;
    struct id_entry **pp = &id->delayed;
    while (*pp) {
        struct id_entry *e = *pp;
        if (e->next_try_ns <= now) {
            *pp = e->qnext;
            id->qlen--;
            pfr_identity_enqueue(id, e); /* cannot be full: e's place was just freed */
        } else {
            if (e->next_try_ns < earliest)
                earliest = e->next_try_ns;
            pp = &e->qnext;
        }
    }
    return earliest;
}

static void wait_until(pfr_identity *id, int64_t deadline)
{
    if (deadline == INT64_MAX) {
        pthread_cond_wait(&id->wake, &id->mu);
        return;
    }
    struct timespec ts = {.tv_sec = deadline / 1000000000ll, .tv_nsec = deadline % 1000000000ll};
    pthread_cond_timedwait(&id->wake, &id->mu, &ts);
}

static void work_one(pfr_identity *id, struct id_entry *e)
{
    struct job j = {.cg = e->cg, .pid = e->pid};
    pthread_mutex_unlock(&id->mu);
    char cid[PFR_IDENTITY_ID_MAX] = "", err[ERRLEN] = "";
    bool not_sandbox = false;
    int found = resolve(id, &j, cid, err, &not_sandbox);
    pthread_mutex_lock(&id->mu);
    apply(id, e, found, cid, err);
    if (not_sandbox) { /* another process of the cgroup may name it: see sandbox_recheck */
        e->checked_pid = j.pid;
        e->next_try_ns = pfr_clock_mono_ns() + id->retry_min_ns;
    }
}

void *pfr_identity_worker_main(void *arg)
{
    pfr_identity *id = arg;
    pthread_mutex_lock(&id->mu);
    while (!atomic_load(&id->stop)) {
        int64_t now = pfr_clock_mono_ns();
        int64_t next = promote_delayed(id, now);
        struct id_entry *e = id->qhead;
        if (e) {
            id->qhead = e->qnext;
            if (!id->qhead)
                id->qtail = NULL;
            id->qlen--;
            work_one(id, e);
            continue;
        }
        wait_until(id, next);
    }
    pthread_mutex_unlock(&id->mu);
    return NULL;
}
