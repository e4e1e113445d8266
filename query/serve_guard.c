/* Deadlines and room of `pfr serve`'s connections, enforced by a thread of the guard's own. */
#include "serve_guard.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "pfr_clock.h"

#define TICK_NS 200000000LL /* how often deadlines are looked at */

typedef struct addr_key {
    sa_family_t family; /* AF_INET, AF_INET6, or 0: unknown */
    unsigned char bytes[16];
} addr_key;

struct pfr_serve_guard_slot {
    int fd; /* -1: shut down already (closing) */
    bool used;
    bool answering;      /* its request has arrived; else idle */
    int64_t since_ns;    /* when it last became idle (CLOCK_MONOTONIC) */
    int64_t deadline_ns; /* CLOCK_MONOTONIC */
    addr_key addr;       /* the client's address */
};

struct pfr_serve_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool stop;
    int64_t header_ns, request_ns;
    unsigned max_conns, max_per_addr;
    unsigned n; /* slots: the capacity */
    pfr_serve_guard_stats stats;
    pfr_serve_guard_slot *slots;
};

static addr_key key_of(const struct sockaddr *sa)
{
    addr_key k = {0};
    if (sa && sa->sa_family == AF_INET) {
        k.family = AF_INET;
        memcpy(k.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        k.family = AF_INET6;
        memcpy(k.bytes, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    return k;
}

static bool same_addr(const addr_key *a, const addr_key *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

/* Open and not shut down yet; with addr, only those of that address. */
static bool live(const pfr_serve_guard_slot *s, const addr_key *addr)
{
    return s->used && s->fd >= 0 && (!addr || same_addr(&s->addr, addr));
}

/* Shut a connection's socket down; libmicrohttpd's thread then sees its end and closes it. The
 * mutex is held: a connection cannot finish closing (pfr_serve_guard_close comes before its
 * socket is closed) while its slot is looked at, so the descriptor is still its own. */
static void shut(pfr_serve_guard_slot *s, uint64_t *counter)
{
    shutdown(s->fd, SHUT_RDWR);
    s->fd = -1;
    (*counter)++;
}

static void cut_late(pfr_serve_guard *g, int64_t now)
{
    for (unsigned i = 0; i < g->n; i++)
        if (live(&g->slots[i], NULL) && now > g->slots[i].deadline_ns)
            shut(&g->slots[i], &g->stats.cut);
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

int pfr_serve_guard_new(unsigned max_conns, unsigned max_per_addr, int64_t header_ns,
                        int64_t request_ns, pfr_serve_guard **out)
{
    pfr_serve_guard *g = calloc(1, sizeof(*g));
    max_conns = max_conns ? max_conns : 1;
    /* Twice the limit: room for as many connections again that were shut down and are
     * closing (their threads close them within moments). */
    unsigned n = 2 * max_conns;
    if (!g || !(g->slots = calloc(n, sizeof(*g->slots)))) {
        free(g);
        return -ENOMEM;
    }
    g->n = n;
    g->max_conns = max_conns;
    g->max_per_addr = max_per_addr ? max_per_addr : max_conns;
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

unsigned pfr_serve_guard_capacity(const pfr_serve_guard *g)
{
    return g->n;
}

/* Make room for one more connection among those of addr (NULL: among all) when limit of them are
 * open already: shut down the one idle longest. false when every one of them is answering. */
static bool make_room(pfr_serve_guard *g, const addr_key *addr, unsigned limit)
{
    unsigned open = 0;
    pfr_serve_guard_slot *oldest = NULL;
    for (unsigned i = 0; i < g->n; i++) {
        pfr_serve_guard_slot *s = &g->slots[i];
        if (!live(s, addr))
            continue;
        open++;
        if (!s->answering && (!oldest || s->since_ns < oldest->since_ns))
            oldest = s;
    }
    if (open < limit)
        return true;
    if (!oldest)
        return false;
    shut(oldest, &g->stats.evicted);
    return true;
}

pfr_serve_guard_slot *pfr_serve_guard_open(pfr_serve_guard *g, int fd, const struct sockaddr *addr)
{
    addr_key k = key_of(addr);
    pfr_serve_guard_slot *s = NULL;
    pthread_mutex_lock(&g->mu);
    if (make_room(g, &k, g->max_per_addr) && make_room(g, NULL, g->max_conns))
        for (unsigned i = 0; i < g->n && !s; i++)
            if (!g->slots[i].used)
                s = &g->slots[i];
    int64_t now = pfr_clock_mono_ns();
    if (s)
        *s = (pfr_serve_guard_slot){
            .fd = fd, .used = true, .since_ns = now, .deadline_ns = now + g->header_ns, .addr = k};
    else {
        shutdown(fd, SHUT_RDWR);
        g->stats.refused++;
    }
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

static void set_state(pfr_serve_guard *g, pfr_serve_guard_slot *slot, bool answering)
{
    if (!slot)
        return;
    pthread_mutex_lock(&g->mu);
    int64_t now = pfr_clock_mono_ns();
    slot->answering = answering;
    slot->since_ns = now;
    slot->deadline_ns = now + (answering ? g->request_ns : g->header_ns);
    pthread_mutex_unlock(&g->mu);
}

void pfr_serve_guard_answering(pfr_serve_guard *g, pfr_serve_guard_slot *slot)
{
    set_state(g, slot, true);
}

void pfr_serve_guard_waiting(pfr_serve_guard *g, pfr_serve_guard_slot *slot)
{
    set_state(g, slot, false);
}

pfr_serve_guard_stats pfr_serve_guard_get_stats(pfr_serve_guard *g)
{
    pthread_mutex_lock(&g->mu);
    pfr_serve_guard_stats st = g->stats;
    pthread_mutex_unlock(&g->mu);
    return st;
}
