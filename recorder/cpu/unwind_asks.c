/* unwind_asks: the sampler's requests for unwind tables, read on a thread of their own. */
#include "unwind_asks.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <bpf/libbpf.h>

#include "cpu_profile.h"

struct pfr_unwind_asks {
    pfr_unwinder *u;
    struct ring_buffer *rb;
    int stop_fd; /* eventfd: written to stop the thread */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    /* read-only views of the ring's positions: flush() waits for the consumer to pass the
     * producer it saw */
    const volatile uint64_t *consumer, *producer;
    size_t page;
};

static int handle_ask(void *ctx, void *data, size_t size)
{
    pfr_unwind_asks *a = ctx;
    struct pfr_unwind_req req;
    if (size < sizeof(req))
        return 0;
    memcpy(&req, data, sizeof(req)); /* records are not aligned for direct use */
    if (req.ev.type == PFR_EV_UNWIND)
        pfr_unwinder_request(a->u, &req);
    return 0;
}

static void *asks_main(void *arg)
{
    pfr_unwind_asks *a = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ring_buffer__epoll_fd(a->rb)};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0) {
        if (ep >= 0)
            close(ep);
        return NULL; /* (checked by start: cannot happen but for want of memory) */
    }
    ev.data.fd = a->stop_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, a->stop_fd, &ev);
    while (!atomic_load(&a->stop)) {
        struct epoll_event got[2];
        /* no timeout: the sampler submits every request with a wake-up, and the stop writes
         * stop_fd (a timed wake-up each second cost the idle host 1.7 ms of CPU a minute) */
        epoll_wait(ep, got, 2, -1);
        ring_buffer__consume(a->rb);
    }
    close(ep);
    return NULL;
}

int pfr_unwind_asks_start(int ring_fd, pfr_unwinder *u, pfr_unwind_asks **out, char *err,
                          size_t errlen)
{
    pfr_unwind_asks *a = calloc(1, sizeof(*a));
    if (!a) {
        snprintf(err, errlen, "unwind requests: out of memory");
        return -ENOMEM;
    }
    a->u = u;
    a->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    a->rb = ring_buffer__new(ring_fd, handle_ask, a, NULL);
    if (a->stop_fd < 0 || !a->rb) {
        int rc = -errno;
        snprintf(err, errlen, "unwind requests: cannot read their ring: %s", strerror(errno));
        pfr_unwind_asks_stop(a);
        return rc;
    }
    /* the BPF ring buffer's first page holds the consumer position, the second the producer's */
    a->page = (size_t)sysconf(_SC_PAGESIZE);
    void *c = mmap(NULL, a->page, PROT_READ, MAP_SHARED, ring_fd, 0);
    void *p = mmap(NULL, a->page, PROT_READ, MAP_SHARED, ring_fd, (off_t)a->page);
    a->consumer = c == MAP_FAILED ? NULL : c;
    a->producer = p == MAP_FAILED ? NULL : p;
    int rc = pthread_create(&a->thread, NULL, asks_main, a);
    if (rc) {
        snprintf(err, errlen, "unwind requests: cannot start their thread: %s", strerror(rc));
        pfr_unwind_asks_stop(a);
        return -rc;
    }
    pthread_setname_np(a->thread, "pfr-uw-asks");
    a->started = true;
    *out = a;
    return 0;
}

void pfr_unwind_asks_flush(pfr_unwind_asks *a, int timeout_ms)
{
    if (!a || !a->consumer || !a->producer)
        return;
    uint64_t target = __atomic_load_n(a->producer, __ATOMIC_ACQUIRE);
    for (int waited = 0; waited < timeout_ms; waited++) {
        if ((int64_t)(__atomic_load_n(a->consumer, __ATOMIC_ACQUIRE) - target) >= 0)
            return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

void pfr_unwind_asks_stop(pfr_unwind_asks *a)
{
    if (!a)
        return;
    if (a->started) {
        atomic_store(&a->stop, true);
        uint64_t one = 1;
        if (write(a->stop_fd, &one, sizeof(one)) < 0) {
            /* cannot fail: an eventfd only refuses at its 2^64-2 limit */
        }
        pthread_join(a->thread, NULL);
    }
    if (a->consumer)
        munmap((void *)a->consumer, a->page);
    if (a->producer)
        munmap((void *)a->producer, a->page);
    ring_buffer__free(a->rb);
    if (a->stop_fd >= 0)
        close(a->stop_fd);
    free(a);
}
