/* collector: one source's collections on a thread of its own (see collector.h). */
#include "collector.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_clock.h"
#include "pfr_log.h"

enum emit_state { EMIT_NONE, EMIT_PENDING, EMIT_DONE };

struct pfr_collector {
    pfr_source src;              /* the source collected (not owned) */
    pfr_daemon_metrics *metrics; /* where its counters are mirrored (not owned), or NULL */
    int wake_fd;                 /* the main thread's eventfd (not owned) */
    char name[16];               /* the thread's name: "pfr-<source>" */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* both directions: the queue is one slot each way */
    /* under lock: */
    bool job;     /* a collection was posted and not taken yet */
    bool running; /* a collection is being made */
    bool quit, exited, abandoned;
    int64_t job_start, job_end; /* the posted collection's range */
    int64_t began_ns;           /* when the running collection began (monotonic) */
    enum emit_state emit;       /* the one emit in flight */
    const pfr_chunk_in *emit_chunks;
    size_t emit_n;
    int emit_rc;
    pfr_collector_stats st;
    void *stats; /* the source's stats, filled on this thread (desc->stats_size bytes, owned) */
    /* the main thread's only: */
    int64_t next_start;
};

static void wake_main(pfr_collector *c)
{
    uint64_t one = 1;
    /* an eventfd only refuses at its 2^64-2 limit; the main thread's poll reads it down */
    if (write(c->wake_fd, &one, sizeof(one)) != sizeof(one))
        return;
}

/* The source's emit, on the collector's thread: wait until the main thread wrote the chunks. */
static int emit_to_main(const pfr_chunk_in *chunks, size_t n, void *ctx)
{
    pfr_collector *c = ctx;
    pthread_mutex_lock(&c->lock);
    if (c->quit) {
        pthread_mutex_unlock(&c->lock);
        return -ECANCELED;
    }
    c->emit_chunks = chunks;
    c->emit_n = n;
    c->emit = EMIT_PENDING;
    wake_main(c);
    while (c->emit == EMIT_PENDING && !c->quit)
        pthread_cond_wait(&c->cond, &c->lock);
    int rc = c->emit == EMIT_DONE ? c->emit_rc : -ECANCELED;
    c->emit = EMIT_NONE;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* The source's counters through its descriptor's metric tables. */
static void publish_stats(pfr_collector *c)
{
    const pfr_source_desc *d = c->src.desc;
    if (!c->metrics || !c->stats || !d || !d->metrics)
        return;
    memset(c->stats, 0, d->stats_size);
    c->src.ops->stats(c->src.self, c->stats);
    for (const pfr_metric_table *const *t = d->metrics; *t; t++)
        pfr_daemon_metrics_publish(c->metrics, *t, c->stats, NULL);
}

/* The daemon's top level, on this thread: the source's work, then its counters. */
static void collect_one(pfr_collector *c, int64_t start, int64_t end)
{
    const pfr_source_ops *ops = c->src.ops;
    int rc = ops->collect(c->src.self, start, end, emit_to_main, c);
    if (rc) {
        pfr_warn("source %s: interval lost: %s", ops->name, strerror(-rc));
        if (c->metrics)
            pfr_daemon_metrics_error(c->metrics, ops->name, strerror(-rc));
    }
    if (ops->log_stats)
        ops->log_stats(c->src.self);
    publish_stats(c);
}

static void *thread_main(void *arg)
{
    pfr_collector *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->job && !c->quit)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->quit && !c->job)
            break;
        int64_t start = c->job_start, end = c->job_end;
        c->job = false;
        c->running = true;
        c->began_ns = pfr_clock_mono_ns();
        pthread_mutex_unlock(&c->lock);

        collect_one(c, start, end);

        pthread_mutex_lock(&c->lock);
        c->running = false;
        c->st.collections++;
        c->st.last_ns = (uint64_t)(pfr_clock_mono_ns() - c->began_ns);
        wake_main(c);
        pthread_cond_broadcast(&c->cond);
    }
    bool abandoned = c->abandoned;
    c->exited = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (abandoned) {
        /* the main thread gave up on us and forgot the collector: ours to free */
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c->stats);
        free(c);
    }
    return NULL;
}

int pfr_collector_start(const pfr_source *src, int64_t start_ns, int wake_fd,
                        pfr_daemon_metrics *metrics, pfr_collector **out)
{
    pfr_collector *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->src = *src;
    c->metrics = metrics;
    if (src->ops->stats && src->desc && src->desc->stats_size &&
        !(c->stats = calloc(1, src->desc->stats_size))) {
        free(c);
        return -ENOMEM;
    }
    c->wake_fd = wake_fd;
    c->next_start = start_ns;
    snprintf(c->name, sizeof(c->name), "pfr-%s", src->ops->name);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&c->thread, NULL, thread_main, c);
    if (rc) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c->stats);
        free(c);
        return -rc;
    }
    pthread_setname_np(c->thread, c->name);
    *out = c;
    return 0;
}

int pfr_collector_post(pfr_collector *c, int64_t end_ns, bool always)
{
    pthread_mutex_lock(&c->lock);
    if (c->running || c->job) {
        c->st.folded++;
        pthread_mutex_unlock(&c->lock);
        return -EBUSY;
    }
    if (!always && c->src.ops->due && end_ns - c->next_start < PFR_COLLECT_AT_LEAST_NS &&
        !c->src.ops->due(c->src.self, end_ns)) {
        c->st.not_due++;
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    c->job = true;
    c->job_start = c->next_start;
    c->job_end = end_ns;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    c->next_start = end_ns;
    return 0;
}

bool pfr_collector_serve(pfr_collector *c, pfr_emit_fn write, void *write_ctx)
{
    pthread_mutex_lock(&c->lock);
    if (c->emit == EMIT_PENDING) {
        const pfr_chunk_in *chunks = c->emit_chunks;
        size_t n = c->emit_n;
        /* the collector waits for this answer: the chunks stay valid while we write */
        pthread_mutex_unlock(&c->lock);
        int rc = write(chunks, n, write_ctx);
        pthread_mutex_lock(&c->lock);
        c->emit_rc = rc;
        c->emit = EMIT_DONE;
        pthread_cond_broadcast(&c->cond);
    }
    bool idle = !c->running && !c->job;
    pthread_mutex_unlock(&c->lock);
    return idle;
}

bool pfr_collector_busy(pfr_collector *c)
{
    pthread_mutex_lock(&c->lock);
    bool busy = c->running || c->job;
    pthread_mutex_unlock(&c->lock);
    return busy;
}

int64_t pfr_collector_next_start(const pfr_collector *c)
{
    return c->next_start;
}

void pfr_collector_stats_get(pfr_collector *c, pfr_collector_stats *st)
{
    pthread_mutex_lock(&c->lock);
    *st = c->st;
    st->running_for_ns = c->running ? pfr_clock_mono_ns() - c->began_ns : 0;
    pthread_mutex_unlock(&c->lock);
}

const char *pfr_collector_name(const pfr_collector *c)
{
    return c->src.ops->name;
}

int pfr_collector_stop(pfr_collector *c, int64_t timeout_ns)
{
    int64_t deadline = pfr_clock_mono_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    pthread_mutex_lock(&c->lock);
    c->quit = true;
    c->job = false;
    pthread_cond_broadcast(&c->cond);
    int rc = 0;
    while (!c->exited && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    if (!c->exited) {
        c->abandoned = true;
        pthread_mutex_unlock(&c->lock);
        pthread_detach(c->thread);
        return -ETIMEDOUT;
    }
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c->stats);
    free(c);
    return 0;
}
