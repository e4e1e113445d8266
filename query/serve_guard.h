/*
 * serve_guard: how long one request may hold a connection of `pfr serve`.
 *
 * libmicrohttpd's connection timeout counts idleness only: a client that sends a byte a second
 * keeps its connection, and with a thread per connection a thread, for as long as it likes, so a
 * few dozen slow clients could hold every slot. The guard gives each connection a deadline, a
 * short one while its request arrives and a longer one while it is answered, and its thread
 * shuts down the socket of a connection past its deadline (libmicrohttpd then closes it).
 */
#ifndef PFR_SERVE_GUARD_H
#define PFR_SERVE_GUARD_H

#include <stdint.h>

typedef struct pfr_serve_guard pfr_serve_guard;
typedef struct pfr_serve_guard_slot pfr_serve_guard_slot;

/* Up to max_conns connections; header_ns: from a connection's start (or its previous answer)
 * until its request has arrived; request_ns: from then until the answer is sent. Starts the
 * guard's thread. 0 or -errno. */
int pfr_serve_guard_new(unsigned max_conns, int64_t header_ns, int64_t request_ns,
                        pfr_serve_guard **out);
/* Stops the thread. Call after the HTTP daemon stopped (no slot in use any more). */
void pfr_serve_guard_free(pfr_serve_guard *g);

/* A new connection on socket fd: its slot (NULL when all are taken: not guarded). */
pfr_serve_guard_slot *pfr_serve_guard_open(pfr_serve_guard *g, int fd);
/* The connection is closing (before its socket is closed): the slot is free again. */
void pfr_serve_guard_close(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* Its request has arrived: the answer must be out within request_ns. */
void pfr_serve_guard_answering(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* Its answer is out: a next request on the connection must arrive within header_ns. */
void pfr_serve_guard_waiting(pfr_serve_guard *g, pfr_serve_guard_slot *slot);
/* Connections shut down for being past their deadline. */
uint64_t pfr_serve_guard_cut(pfr_serve_guard *g);

#endif
