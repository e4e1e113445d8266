/*
 * scrape_netns: sockets inside another process's network namespace, for scraping Go programs in
 * containers at the loopback address they listen on.
 *
 * pfr_scrape_netns_socket() moves the calling thread into the target namespace (setns(fd,
 * CLONE_NEWNET)), creates the socket there (a socket keeps its namespace for life) and moves the
 * thread back to the scraper's own namespace (a descriptor opened when the scraper was made).
 * Only the calling thread moves; the rest of the process never leaves its namespace.
 *
 * Failures:
 *   - setns refused for lack of permission (EPERM: no CAP_SYS_ADMIN, or a seccomp filter such
 *     as systemd's RestrictNamespaces=): the state becomes DENIED for good and no namespace is
 *     entered again (the caller reports it once and skips such processes);
 *   - setns refused for another reason (the descriptor is not a network namespace, ...): that
 *     request fails (counted in errors);
 *   - the thread cannot return to its own namespace (should never happen): the state becomes
 *     BROKEN and from then on every socket of this sc_netns fails, also those not asking for a
 *     namespace, so nothing is ever sent from the wrong namespace. Fatal for scraping until the
 *     process restarts; the caller logs it loudly.
 *
 * One thread at a time uses an sc_netns (the round's thread); the state may be read from any.
 */
#ifndef PFR_SCRAPE_NETNS_H
#define PFR_SCRAPE_NETNS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum sc_netns_state {
    SC_NETNS_USABLE = 0, /* may be tried */
    SC_NETNS_OFF,        /* disabled by configuration, or no own namespace to return to */
    SC_NETNS_DENIED,     /* setns not permitted: other namespaces are skipped */
    SC_NETNS_BROKEN,     /* could not return: no more sockets at all */
};

struct sc_netns {
    int self_fd; /* the scraper's own network namespace; -1 if none */
    atomic_int state;
    atomic_uint_fast64_t denied; /* setns refused for lack of permission */
    atomic_uint_fast64_t errors; /* setns into a target failed otherwise */
    int last_errno;              /* of the last failure */
};

/* Open this thread's network namespace as the one to return to. enabled false: OFF. */
void pfr_scrape_netns_init(struct sc_netns *n, bool enabled);
/* Tests: return to self_fd (taken over) instead. */
void pfr_scrape_netns_init_fd(struct sc_netns *n, int self_fd);
void pfr_scrape_netns_close(struct sc_netns *n);

static inline enum sc_netns_state sc_netns_get_state(struct sc_netns *n)
{
    return (enum sc_netns_state)atomic_load(&n->state);
}

/* socket(domain, type | SOCK_CLOEXEC, proto) inside the network namespace of ns_fd, or here when
 * ns_fd < 0. Returns the descriptor, or a negative errno: -EPERM (not permitted, or DENIED/OFF),
 * -ENOTRECOVERABLE (BROKEN), another setns or socket error. */
int pfr_scrape_netns_socket(struct sc_netns *n, int ns_fd, int domain, int type, int proto);

#endif
