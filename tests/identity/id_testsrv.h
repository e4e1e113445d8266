/*
 * A tiny HTTP/1.1 stand-in for Docker's API (on a unix socket) and the kubelet (on TCP) in the
 * resolver's tests: one thread, one connection at a time, canned answers by exact path.
 */
#ifndef PFR_ID_TESTSRV_H
#define PFR_ID_TESTSRV_H

#include <stdbool.h>
#include <stddef.h>

struct ts_route {
    const char *path; /* request target, exact (query included) */
    int status;
    const char *body;
    size_t body_len; /* 0 = strlen(body) */
    bool hang;       /* accept and read the request, never answer (until stopped) */
};

struct ts_server;

/* Serve routes (borrowed; must outlive the server) on a new unix socket at path, or on TCP
 * 127.0.0.1 at an ephemeral port (*port). Unknown paths get 404. 0 or -errno. */
int ts_start_unix(const char *path, const struct ts_route *routes, size_t n,
                  struct ts_server **out);
int ts_start_tcp(const struct ts_route *routes, size_t n, int *port, struct ts_server **out);
/* Requests answered (or hung) so far. */
unsigned ts_requests(struct ts_server *s);
/* The Authorization header of the latest request ("" if none). */
void ts_last_auth(struct ts_server *s, char *buf, size_t len);
void ts_stop(struct ts_server *s);

#endif
