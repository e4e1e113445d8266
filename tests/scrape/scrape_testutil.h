/*
 * Helpers of the pfr_scrape tests: child processes (the Go test servers), a libmicrohttpd test
 * server with good and faulty pprof endpoints and a kubelet-like /pods, synthetic pprof bodies,
 * and a scratch store.
 */
#ifndef PFR_SCRAPE_TESTUTIL_H
#define PFR_SCRAPE_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pfr_profile.h"
#include "pfr_scrape.h"
#include "pfr_store.h"

/* ---- child processes ---- */
typedef struct tu_proc {
    pid_t pid;
    int out; /* the child's stdout */
} tu_proc;

/* Start argv[0] with stdout on a pipe; the child dies with the test (PR_SET_PDEATHSIG). */
int pfr_tu_spawn(tu_proc *p, char *const argv[]);
/* pfr_tu_spawn in a new network namespace of its own (unshare(CLONE_NEWNET), loopback up; root
 * only): the namespace goes away with the child. */
int pfr_tu_spawn_netns(tu_proc *p, char *const argv[]);
/* Read stdout lines until one starts with "key=" and copy its value; false on timeout/EOF. */
bool pfr_tu_read_value(tu_proc *p, const char *key, char *buf, size_t len, int timeout_ms);
/* SIGKILL and reap. */
void pfr_tu_kill(tu_proc *p);
/* The port of "host:port". */
unsigned pfr_tu_port_of(const char *hostport);

/* ---- synthetic pprof bodies, as Go's runtime/pprof writes them ---- */
/* The body of endpoint ep at the n-th request: cumulative values grow with n. Functions:
 * main.goodCPU, main.goodAlloc, main.goodPark, main.goodBlock, main.goodMutex. */
int pfr_tu_make_profile(int ep, int64_t n, uint8_t **out, size_t *len);

/* ---- the test server ---- */
/* Routes by the first path segment:
 *   /good/...        valid profiles of every endpoint (pfr_tu_make_profile, n = requests so far);
 *                    /debug/pprof/... (a pod's URL) is served the same way
 *   /garbage/...     200 with bytes that are not pprof
 *   /huge/...        200 with a 16 MiB body announced by Content-Length
 *   /hugechunked/... 200 with a 16 MiB chunked body (no length)
 *   /slow/...        200 with a body that dribbles one byte every 200 ms
 *   /e500/...        500
 *   /redirect/...    302 to the same path under /good
 *   /flaky/...       500 for the first flaky_failures requests of each endpoint, then good
 *   /pods            the kubelet pod list set by pfr_tu_server_set_pods (401 without the token)
 */
typedef struct tu_server tu_server;
/* cert/key: PEM files for https, or NULL for http. */
int pfr_tu_server_start(tu_server **out, const char *cert, const char *key);
void pfr_tu_server_stop(tu_server *s);
unsigned pfr_tu_server_port(const tu_server *s);
void pfr_tu_server_set_flaky(tu_server *s, int failures);
/* body NULL: 500. token NULL: no check. */
void pfr_tu_server_set_pods(tu_server *s, const char *body, const char *token);
/* Requests seen by a mode ("good", "garbage", ...), and the most in flight at once. */
unsigned pfr_tu_server_requests(tu_server *s, const char *mode);
unsigned pfr_tu_server_max_inflight(tu_server *s, const char *mode);

/* ---- store ---- */
/* A fresh ring in a new temporary directory (path written to dir, PATH_MAX). */
int pfr_tu_store_open(char *dir, pfr_store **out);
void pfr_tu_store_remove(char *dir);

/* Does any frame of any sample of p with a non-zero value of type index t name function fn?
 * Returns the sum of that type's values over such samples. */
int64_t pfr_tu_value_of(const pfr_profile *p, int t, const char *fn);

/* Write a file. */
int pfr_tu_write_file(const char *path, const void *data, size_t len);

#endif
