/* Deadlines of `pfr serve`'s connections, enforced by a thread of the guard's own. */
#include "serve_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "pfr_clock.h"

#define TICK_NS 200000000LL /* how often deadlines are looked at */

struct pfr_serve_guard_slot {
    int fd; /* -1: shut down already */
    bool used;
    int64_t deadline_ns; /* CLOCK_MONOTONIC */
};

struct pfr_serve_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool stop;
    int64_t header_ns, request_ns;
    unsigned n;
    uint64_t cut;
    pfr_serve_guard_slot *slots;
};

/* Shut down the sockets past their deadline. The mutex is held: a connection cannot finish
 * closing (pfr_serve_guard_close comes before its socket is closed) while its slot is looked
 * at, so the descriptor is still the connection's own. */
static void cut_late(pfr_serve_guard *g, int64_t now)
{
    for (unsigned i = 0; i < g->n; i++) {
        pfr_serve_guard_slot *s = &g->slots[i];
        if (s->used && s->fd >= 0 && now > s->deadline_ns) {
            shutdown(s->fd, SHUT_RDWR);
            s->fd = -1;
            g->cut++;
        }
    }
}

static void *guard_main(void *arg)
{
    pfr_serve_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        cut_late(g, pfr_clock_mono_ns());
        int64_t at = pfr_clock_mono_ns() + TICK_NS;
        struct timespec ts = {.tv_sec = at / 1000000000LL, .tv_nsec = at % 1000000000LL};
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int pfr_serve_guard_new(unsigned max_conns, int64_t header_ns, int64_t request_ns,
                        pfr_serve_guard **out)
{
    pfr_serve_guard *g = calloc(1, sizeof(*g));
    if (!g || !(g->slots = calloc(max_conns ? max_conns : 1, sizeof(*g->slots)))) {
        free(g);
        return -ENOMEM;
    }
    g->n = max_conns;
    g->header_ns = header_ns;
    g->request_ns = request_ns;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&g->thread, NULL, guard_main, g);
    if (rc) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g->slots);
        free(g);
        return -rc;
    }
    *out = g;
    return 0;
}

void pfr_serve_guard_free(pfr_serve_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->slots);
    free(g);
}

pfr_serve_guard_slot *pfr_serve_guard_open(pfr_serve_guard *g, int fd)
{
    pfr_serve_guard_slot *s = NULL;
    pthread_mutex_lock(&g->mu);
    for (unsigned i = 0; i < g->n && !s; i++)
        if (!g->slots[i].used)
            s = &g->slots[i];
    if (s)
        *s = (pfr_serve_guard_slot){
            .fd = fd, .used = true, .deadline_ns = pfr_clock_mono_ns() + g->header_ns};
    pthread_mutex_unlock(&g->mu);
    return s;
}

void pfr_serve_guard_close(pfr_serve_guard *g, pfr_serve_guard_slot *slot)
{
    if (!slot)
        return;
    pthread_mutex_lock(&g->mu);
    slot->used = false;
    pthread_mutex_unlock(&g->mu);
}

static void set_deadline(pfr_serve_guard *g, pfr_serve_guard_slot *slot, int64_t in_ns)
{
    if (!slot)
        return;
    pthread_mutex_lock(&g->mu);
    slot->deadline_ns = pfr_clock_mono_ns() + in_ns;
    pthread_mutex_unlock(&g->mu);
}

void pfr_serve_guard_answering(pfr_serve_guard *g, pfr_serve_guard_slot *slot)
{
    set_deadline(g, slot, g->request_ns);
}

void pfr_serve_guard_waiting(pfr_serve_guard *g, pfr_serve_guard_slot *slot)
{
    set_deadline(g, slot, g->header_ns);
}

uint64_t pfr_serve_guard_cut(pfr_serve_guard *g)
{
    pthread_mutex_lock(&g->mu);
    uint64_t n = g->cut;
    pthread_mutex_unlock(&g->mu);
    return n;
}
