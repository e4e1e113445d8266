/* Sockets in another network namespace (see scrape_netns.h). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "scrape_netns.h"

static void init_common(struct sc_netns *n, int fd, enum sc_netns_state st)
{
    n->self_fd = fd;
    atomic_init(&n->state, (int)st);
    atomic_init(&n->denied, 0);
    atomic_init(&n->errors, 0);
    n->last_errno = 0;
}

void pfr_scrape_netns_init(struct sc_netns *n, bool enabled)
{
    /* thread-self: the namespace of the thread creating the scraper, which is the process's */
    int fd = enabled ? open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) : -1;
    init_common(n, fd, fd >= 0 ? SC_NETNS_USABLE : SC_NETNS_OFF);
}

void pfr_scrape_netns_init_fd(struct sc_netns *n, int self_fd)
{
    init_common(n, self_fd, self_fd >= 0 ? SC_NETNS_USABLE : SC_NETNS_OFF);
}

void pfr_scrape_netns_close(struct sc_netns *n)
{
    if (n->self_fd >= 0)
        close(n->self_fd);
    n->self_fd = -1;
}

int pfr_scrape_netns_socket(struct sc_netns *n, int ns_fd, int domain, int type, int proto)
{
    enum sc_netns_state st = sc_netns_get_state(n);
    if (st == SC_NETNS_BROKEN)
        return -ENOTRECOVERABLE; /* this thread may sit in another namespace */
    if (ns_fd < 0) {
        int fd = socket(domain, type | SOCK_CLOEXEC, proto);
        return fd >= 0 ? fd : -errno;
    }
    if (st != SC_NETNS_USABLE)
        return -EPERM;
    if (setns(ns_fd, CLONE_NEWNET) < 0) {
        int e = errno;
        n->last_errno = e;
        if (e == EPERM) {
            atomic_fetch_add(&n->denied, 1);
            atomic_store(&n->state, (int)SC_NETNS_DENIED);
        } else {
            atomic_fetch_add(&n->errors, 1);
        }
        return -e;
    }
    int fd = socket(domain, type | SOCK_CLOEXEC, proto);
    int e = fd < 0 ? errno : 0;
    if (setns(n->self_fd, CLONE_NEWNET) < 0 && setns(n->self_fd, CLONE_NEWNET) < 0) {
        n->last_errno = errno;
        atomic_store(&n->state, (int)SC_NETNS_BROKEN);
        if (fd >= 0)
            close(fd);
        return -ENOTRECOVERABLE;
    }
    return fd >= 0 ? fd : -e;
}
