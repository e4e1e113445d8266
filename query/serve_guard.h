/*
 * serve_guard: which connections of `pfr serve` may stay open, and for how long.
 *
 * Deadlines: libmicrohttpd's connection timeout counts idleness only: a client that sends a byte
 * a second keeps its connection, and with a thread per connection a thread, for as long as it
 * likes. The guard gives each connection a deadline, a short one while its request arrives and a
 * longer one while it is answered, and its thread shuts down the socket of a connection past its
 * deadline (libmicrohttpd then closes it).
 *
 * Room: a connection counts against the limits (in all, and per client address) whatever it
 * does, so connections that never send a request could hold every slot until their deadline,
 * and again the moment they reconnect. When a new connection would pass a limit, the guard shuts
 * down the connection of that address (or of any) that has been idle longest instead: one with
 * no request in progress (silent since it opened, a partial header, or kept alive after its
 * answer). A connection whose request has arrived is never closed for room; only when all of
 * them are answering is the new connection refused.
 */
#ifndef PFR_SERVE_GUARD_H
#define PFR_SERVE_GUARD_H

#include <stdint.h>

struct sockaddr;

typedef struct pfr_serve_guard pfr_serve_guard;
typedef struct pfr_serve_guard_slot pfr_serve_guard_slot;

typedef struct pfr_serve_guard_stats {
    uint64_t cut;     /* shut down past their deadline */
    uint64_t evicted; /* idle ones shut down to make room for a new connection */
    uint64_t refused; /* new ones shut down: no room and none idle */
} pfr_serve_guard_stats;

/* Up to max_conns connections, max_per_addr of one client address; header_ns: from a
 * connection's start (or its previous answer) until its request has arrived; request_ns: from
 * then until the answer is sent. Starts the guard's thread. 0 or -errno. */
int pfr_serve_guard_new(unsigned max_conns, unsigned max_per_addr, int64_t header_ns,
                        int64_t request_ns, pfr_serve_guard **out);
/* Stops the thread. Call after the HTTP daemon stopped (no slot in use any more). */
void pfr_serve_guard_free(pfr_serve_guard *g);
/* Connections that may be open at once, those being closed included: the HTTP daemon's own
 * limit, above max_conns so that a connection shut down for room can finish closing. */
unsigned pfr_serve_guard_capacity(const pfr_serve_guard *g);

/* A new connection on socket fd from addr (NULL: unknown, counted as one address): its slot,
 * after making room as above; NULL when it was refused (its socket is shut down). */
pfr_serve_guard_slot *pfr_serve_guard_open(pfr_serve_guard *g, int fd, const struct sockaddr *addr);
/* The connection is closing (before its socket is closed): the slot is free again. */
void pfr_serve_guard_close(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* Its request has arrived: the answer must be out within request_ns; it is no longer idle. */
void pfr_serve_guard_answering(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* Its answer is out: a next request on the connection must arrive within header_ns; idle. */
void pfr_serve_guard_waiting(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* What the guard has shut down so far. */
pfr_serve_guard_stats pfr_serve_guard_get_stats(pfr_serve_guard *g);

#endif
