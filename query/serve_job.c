/* Bounded API calls: each runs in its own worker thread; the caller waits until the deadline.
 * At most max_queries workers exist at once (abandoned ones included): a call waits for a free
 * slot, still within its deadline. So a burst of slow queries costs at most that many cores and
 * the page always gets an answer (possibly a 503) in time. A call whose answer is being computed
 * already (the same key, in flight) waits for that answer instead of computing it again. */
#include "pfr_serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pfr_serve_jobs {
    const pfr_serve_api *api;
    pfr_serve_cache *cache;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* broadcast whenever a worker ends (CLOCK_MONOTONIC) */
    unsigned running;
    struct job *in_flight; /* running jobs whose answer will be kept, by next_in_flight */
};

typedef struct job {
    pfr_serve_jobs *owner;
    char *cache_key; /* NULL: not to be kept */
    char *path;
    pfr_kv *args; /* owned copies */
    size_t nargs;
    int64_t now_ns;
    pfr_serve_response resp;
    int rc;
    bool done, abandoned;
    pthread_cond_t cv; /* signalled when done */
    struct job *next_in_flight;
} job;

static void job_free(job *j)
{
    if (!j)
        return;
    free(j->path);
    free(j->cache_key);
    for (size_t i = 0; i < j->nargs; i++) {
        free((char *)j->args[i].key);
        free((char *)j->args[i].value);
    }
    free(j->args);
    pfr_serve_response_free(&j->resp);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static job *job_new(pfr_serve_jobs *owner, const char *path, const pfr_kv *args, size_t nargs,
                    int64_t now_ns)
{
    job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(j);
        return NULL;
    }
    j->owner = owner;
    j->now_ns = now_ns;
    j->path = strdup(path);
    j->args = calloc(nargs ? nargs : 1, sizeof(*j->args));
    bool ok = j->path && j->args;
    for (size_t i = 0; ok && i < nargs; i++, j->nargs++) {
        j->args[i].key = strdup(args[i].key);
        j->args[i].value = strdup(args[i].value ? args[i].value : "");
        ok = j->args[i].key && j->args[i].value;
    }
    if (!ok) {
        job_free(j);
        return NULL;
    }
    return j;
}

/* ---- jobs in flight, by cache key (under mu) ---- */
static bool in_flight(const pfr_serve_jobs *o, const char *key)
{
    for (const job *j = o->in_flight; key && j; j = j->next_in_flight)
        if (strcmp(j->cache_key, key) == 0)
            return true;
    return false;
}

static void in_flight_remove(pfr_serve_jobs *o, const job *j)
{
    for (job **p = &o->in_flight; *p; p = &(*p)->next_in_flight)
        if (*p == j) {
            *p = j->next_in_flight;
            return;
        }
}

static void *worker(void *arg)
{
    job *j = arg;
    pfr_serve_jobs *o = j->owner;
    int rc = pfr_serve_api_call(o->api, j->path, j->args, j->nargs, j->now_ns, &j->resp);
    if (rc == 0)
        pfr_serve_cache_put(o->cache, j->cache_key, &j->resp);
    pthread_mutex_lock(&o->mu);
    in_flight_remove(o, j); /* after the put: a caller woken now finds the answer kept */
    j->rc = rc;
    j->done = true;
    bool orphan = j->abandoned;
    o->running--;
    pthread_cond_broadcast(&o->idle);
    if (!orphan)
        pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&o->mu);
    /* An abandoned job is this thread's to free; otherwise the caller frees it. Neither j nor o
     * is touched after the unlock otherwise (pfr_serve_jobs_free may free o at once). */
    if (orphan)
        job_free(j);
    return NULL;
}

pfr_serve_jobs *pfr_serve_jobs_new(const pfr_serve_api *api)
{
    pfr_serve_jobs *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->api = api;
    j->cache = pfr_serve_cache_new(api->limits.cache_bytes, 32);
    if (!j->cache || pthread_mutex_init(&j->mu, NULL) != 0) {
        pfr_serve_cache_free(j->cache);
        free(j);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&j->idle, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&j->mu);
        pfr_serve_cache_free(j->cache);
        free(j);
        return NULL;
    }
    return j;
}

void pfr_serve_jobs_free(pfr_serve_jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    while (j->running)
        pthread_cond_wait(&j->idle, &j->mu);
    pthread_mutex_unlock(&j->mu);
    pthread_cond_destroy(&j->idle);
    pthread_mutex_destroy(&j->mu);
    pfr_serve_cache_free(j->cache);
    free(j);
}

pfr_serve_cache *pfr_serve_jobs_cache(pfr_serve_jobs *j)
{
    return j->cache;
}

unsigned pfr_serve_jobs_running(pfr_serve_jobs *j)
{
    pthread_mutex_lock(&j->mu);
    unsigned n = j->running;
    pthread_mutex_unlock(&j->mu);
    return n;
}

static struct timespec deadline_after(int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t = (int64_t)ts.tv_nsec + ns % 1000000000LL;
    ts.tv_sec += (time_t)(ns / 1000000000LL + t / 1000000000LL);
    ts.tv_nsec = (long)(t % 1000000000LL);
    return ts;
}

static int busy(pfr_serve_response *out, unsigned running)
{
    out->retry_after = 2;
    return pfr_serve_response_error(out, 503,
                                    "busy: %u queries kept running until the deadline "
                                    "(pfr serve --max-queries, --timeout)",
                                    running);
}

/* Start a worker for j once fewer than max_queries run, waiting for a slot until the deadline;
 * answer 503 if none came. 1 = started. */
static int start(pfr_serve_jobs *o, job *j, const struct timespec *dl, pfr_serve_response *out)
{
    pthread_mutex_lock(&o->mu);
    while (o->running >= o->api->limits.max_queries &&
           pthread_cond_timedwait(&o->idle, &o->mu, dl) != ETIMEDOUT)
        ;
    unsigned running = o->running;
    bool full = running >= o->api->limits.max_queries;
    if (!full)
        o->running++;
    if (!full && j->cache_key) {
        j->next_in_flight = o->in_flight;
        o->in_flight = j;
    }
    pthread_mutex_unlock(&o->mu);
    if (full)
        return busy(out, running) < 0 ? -ENOMEM : 0;
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, worker, j);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return 1;
    pthread_mutex_lock(&o->mu);
    in_flight_remove(o, j);
    o->running--;
    pthread_cond_broadcast(&o->idle);
    pthread_mutex_unlock(&o->mu);
    out->retry_after = 2;
    return pfr_serve_response_error(out, 503, "cannot start a query: %s", strerror(rc)) < 0
               ? -ENOMEM
               : 0;
}

/* The answer kept under key, waiting (until dl) for a job computing it when one is in flight:
 * 1 = *out has it, 0 = not kept (compute it), -ETIMEDOUT = still in flight at dl. Looked up under
 * mu: a worker keeps its answer before it leaves the jobs in flight. */
static int cached_or_awaited(pfr_serve_jobs *o, const char *key, const struct timespec *dl,
                             pfr_serve_response *out)
{
    if (!key)
        return 0;
    pthread_mutex_lock(&o->mu);
    bool hit = pfr_serve_cache_get(o->cache, key, out), seen = false, late = false;
    while (!hit && !late && in_flight(o, key)) {
        seen = true;
        late = pthread_cond_timedwait(&o->idle, &o->mu, dl) == ETIMEDOUT && in_flight(o, key);
    }
    pthread_mutex_unlock(&o->mu);
    if (late)
        return -ETIMEDOUT;
    return hit || (seen && pfr_serve_cache_get(o->cache, key, out));
}

static int too_late(pfr_serve_jobs *o, pfr_serve_response *out)
{
    char d[32];
    double s = (double)o->api->limits.timeout_ns / 1e9;
    snprintf(d, sizeof(d), "%.3g s", s);
    out->retry_after = 5;
    return pfr_serve_response_error(
        out, 503, "the query took longer than %s and was abandoned (pfr serve --timeout)", d);
}

int pfr_serve_jobs_prefetch(pfr_serve_jobs *o, const char *path, const pfr_kv *args, size_t nargs,
                            int64_t now_ns)
{
    pfr_serve_response busy_out = {0};
    job *j = job_new(o, path, args, nargs, now_ns);
    if (!j || pfr_serve_cache_key(o->api->store_path, path, args, nargs, &j->cache_key) < 0) {
        job_free(j);
        return -ENOMEM;
    }
    pthread_mutex_lock(&o->mu);
    bool skip = !j->cache_key || in_flight(o, j->cache_key);
    j->abandoned = true; /* nobody waits on it: the worker frees it */
    pthread_mutex_unlock(&o->mu);
    if (skip || pfr_serve_cache_get(o->cache, j->cache_key, &busy_out)) {
        pfr_serve_response_free(&busy_out);
        job_free(j);
        return 0;
    }
    struct timespec now = deadline_after(0); /* a free slot now, or none */
    int rc = start(o, j, &now, &busy_out);
    pfr_serve_response_free(&busy_out);
    if (rc <= 0)
        job_free(j);
    return rc < 0 ? rc : 0;
}

int pfr_serve_jobs_call(pfr_serve_jobs *o, const char *path, const pfr_kv *args, size_t nargs,
                        int64_t now_ns, pfr_serve_response *out)
{
    memset(out, 0, sizeof(*out));
    job *j = job_new(o, path, args, nargs, now_ns);
    if (!j || pfr_serve_cache_key(o->api->store_path, path, args, nargs, &j->cache_key) < 0) {
        job_free(j);
        return pfr_serve_response_error(out, 500, "out of memory");
    }
    struct timespec dl = deadline_after(o->api->limits.timeout_ns);
    int rc = cached_or_awaited(o, j->cache_key, &dl, out);
    if (rc != 0) {
        job_free(j);
        return rc < 0 ? too_late(o, out) : 0;
    }
    rc = start(o, j, &dl, out);
    if (rc <= 0) {
        job_free(j);
        return rc;
    }
    pthread_mutex_lock(&o->mu);
    while (!j->done && pthread_cond_timedwait(&j->cv, &o->mu, &dl) != ETIMEDOUT)
        ;
    bool done = j->done;
    if (!done)
        j->abandoned = true; /* the worker frees it when it ends */
    pthread_mutex_unlock(&o->mu);
    if (!done)
        return too_late(o, out);
    *out = j->resp; /* hand the body over */
    memset(&j->resp, 0, sizeof(j->resp));
    rc = j->rc;
    job_free(j);
    return rc;
}
