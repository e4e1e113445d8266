/*
 * pfr_serve: `pfr serve`, the profiling page in a browser. One HTML page, its script and style
 * (embedded, no external URL) and a small JSON API over the query engine (pfr_query.h): the same
 * planning, merging and diffing as the command line, never a second implementation.
 *
 * Layers (one file each):
 *   serve_api.c   the JSON API as plain functions: (path, arguments, now) -> status + body.
 *                 No HTTP in it, so unit tests call it directly.
 *   serve_job.c   runs one API call in a worker thread with a deadline and a cap on how many
 *                 run at once: a slow query gets a 503 at its deadline, never a stuck page.
 *   serve_cache.c answers kept for repeat views while the ring is unchanged.
 *   serve_http.c  the libmicrohttpd daemon: routing, static assets, Host check, headers, gzip.
 *
 * Errors: 0 or a negative errno with a reason in err (nothing is printed here).
 * Ownership: every *_new/start object belongs to the caller and has a matching free/stop.
 */
#ifndef PFR_SERVE_H
#define PFR_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFR_SERVE_DEFAULT_LISTEN "127.0.0.1:8123"

/* What one request may cost. 0 in any field = its default. */
typedef struct pfr_serve_limits {
    int64_t max_range_ns;       /* longest range a request may ask for; default 31 days */
    int64_t timeout_ns;         /* a query still running after this gets a 503; default 20 s */
    unsigned max_queries;       /* queries running at once, abandoned ones included (more wait
                                   for a slot); default 2 */
    size_t max_points;          /* timeline intervals per request; default 2000 */
    size_t max_top;             /* rows of the top-functions table; default 200 */
    unsigned max_conns;         /* open connections; default 64 (at the limit, the one idle
                                   longest is closed for a new one) */
    unsigned idle_timeout_s;    /* an idle connection is closed after this; default 30 */
    unsigned max_conns_per_ip;  /* open connections of one client address; default a quarter
                                   of max_conns */
    int64_t header_timeout_ns;  /* a request must have arrived this long after its connection
                                   (or its previous answer); default 10 s */
    int64_t request_timeout_ns; /* ... and be answered within this; default timeout_ns + 30 s */
    size_t cache_bytes;         /* answers kept for repeat views; default 64 MiB */
} pfr_serve_limits;

/* The limits with every default filled in. */
pfr_serve_limits pfr_serve_limits_resolve(const pfr_serve_limits *l);

/* ---- the API without HTTP (serve_api.c) ---- */
typedef struct pfr_serve_response {
    unsigned status;          /* HTTP status */
    const char *content_type; /* static string */
    char *body;               /* malloc'ed, owned by the response */
    size_t len;
    unsigned retry_after; /* seconds, 503 only; 0 = none */
} pfr_serve_response;

void pfr_serve_response_free(pfr_serve_response *r);
/* A JSON error body {"error": message, "status": status}. Returns 0 or -ENOMEM. */
int pfr_serve_response_error(pfr_serve_response *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct pfr_serve_api {
    const char *store_path;
    pfr_serve_limits limits; /* resolved */
} pfr_serve_api;

/* Is path an API endpoint ("/api/...")? */
bool pfr_serve_api_path(const char *path);

/* Answer GET path?args: /api/ls, /api/timeline, /api/flame, /api/diff, /api/labels (arguments
 * and bodies in docs/serve.md). Always fills *out (a JSON body, an error one included) and
 * returns 0, or -ENOMEM when not even an error body could be made. args are the query string's
 * key=value pairs in order (a key may repeat: label=pid=42&label=comm=nginx). */
int pfr_serve_api_call(const pfr_serve_api *api, const char *path, const pfr_kv *args, size_t nargs,
                       int64_t now_ns, pfr_serve_response *out);

/* ---- answers kept for repeat views (serve_cache.c) ---- */
typedef struct pfr_serve_cache pfr_serve_cache;

/* At most max_bytes of bodies in at most max_entries answers; least recently used go first. */
pfr_serve_cache *pfr_serve_cache_new(size_t max_bytes, size_t max_entries);
void pfr_serve_cache_free(pfr_serve_cache *c);
/* The key of a call (*out malloc'ed), or *out = NULL when its answer may not be reused: /api/ls,
 * a relative or missing from/to. The key includes the ring files' identity, size and time, so
 * any write to the ring makes a new key. 0 or -ENOMEM. */
int pfr_serve_cache_key(const char *store_path, const char *path, const pfr_kv *args, size_t nargs,
                        char **out);
/* A copy of the answer kept under key (NULL key: false). Thread-safe. */
bool pfr_serve_cache_get(pfr_serve_cache *c, const char *key, pfr_serve_response *out);
/* Keep a copy of a 200 answer (others are ignored). Thread-safe. */
void pfr_serve_cache_put(pfr_serve_cache *c, const char *key, const pfr_serve_response *r);
void pfr_serve_cache_stats(pfr_serve_cache *c, uint64_t *hits, uint64_t *misses);

/* ---- bounded runs (serve_job.c) ---- */
typedef struct pfr_serve_jobs pfr_serve_jobs;

pfr_serve_jobs *pfr_serve_jobs_new(const pfr_serve_api *api);
/* Waits for every job still running (abandoned ones included), then frees. */
void pfr_serve_jobs_free(pfr_serve_jobs *j);
/* Answer from the cache, or run pfr_serve_api_call in a worker thread once fewer than
 * max_queries run; wait at most the timeout for both. Fills *out: the API's answer, or a 503
 * JSON error when no slot came free or the deadline passed (the worker then finishes on its own
 * and only keeps its answer in the cache, so a retry finds it). 0 or -ENOMEM. */
int pfr_serve_jobs_call(pfr_serve_jobs *j, const char *path, const pfr_kv *args, size_t nargs,
                        int64_t now_ns, pfr_serve_response *out);
/* Start the call in the background when a slot is free now, keeping its answer for the call
 * that will follow (a page that names its view asks for that view's data as soon as it loads):
 * pfr_serve_jobs_call then waits for that answer instead of computing it again. Nothing is done
 * for calls whose answer may not be kept, already kept or in flight, or when no slot is free.
 * 0 or -ENOMEM. */
int pfr_serve_jobs_prefetch(pfr_serve_jobs *j, const char *path, const pfr_kv *args, size_t nargs,
                            int64_t now_ns);
/* Jobs running now (for tests and logs). */
unsigned pfr_serve_jobs_running(pfr_serve_jobs *j);
/* The jobs' cache (for tests and logs). */
pfr_serve_cache *pfr_serve_jobs_cache(pfr_serve_jobs *j);

/* ---- the HTTP server (serve_http.c) ---- */
typedef struct pfr_serve pfr_serve;

typedef struct pfr_serve_config {
    const char *store_path;
    const char *listen; /* "HOST:PORT", "[V6]:PORT" or "PORT" (loopback); NULL = default. Port
                           0 picks a free one (see pfr_serve_port) */
    pfr_serve_limits limits;
} pfr_serve_config;

/* Split "HOST:PORT" / "[V6]:PORT" / "PORT" and resolve it (numeric or a name). */
int pfr_serve_parse_listen(const char *listen, void *sockaddr_out, size_t *salen, char *err,
                           size_t errlen);
/* Is the address a loopback one (127.0.0.0/8, ::1)? */
bool pfr_serve_is_loopback(const void *sockaddr);

/* Bind and start serving in background threads. */
int pfr_serve_start(const pfr_serve_config *cfg, pfr_serve **out, char *err, size_t errlen);
/* The bound port, the URL to open ("http://127.0.0.1:8123/"), and whether it is loopback. */
unsigned pfr_serve_port(const pfr_serve *s);
const char *pfr_serve_url(const pfr_serve *s);
bool pfr_serve_loopback(const pfr_serve *s);
/* Connections shut down so far: past their deadline, idle ones closed to make room for a new
 * one, new ones refused (no room and none idle). */
void pfr_serve_conn_stats(pfr_serve *s, uint64_t *cut, uint64_t *evicted, uint64_t *refused);
/* Stop accepting, finish the requests in flight, free. */
void pfr_serve_stop(pfr_serve *s);

/* The page (embedded from query/assets by embed.cmake). */
extern const char pfr_asset_serve_html[];
extern const char pfr_asset_serve_js[];
extern const char pfr_asset_serve_css[];

#ifdef __cplusplus
}
#endif
#endif
