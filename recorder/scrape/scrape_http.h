/*
 * scrape_http: a batch of GET requests run in parallel on one libcurl multi handle, with a
 * bound on transfers in flight in all and per group (a target), connect and total timeouts, a
 * maximum body size, no redirects, no proxies, TLS verification on unless asked otherwise.
 * Connections are kept between batches (keep-alive to the same targets every round).
 *
 * One thread uses an sc_http at a time; pfr_scrape_http_cancel may be called from any thread.
 */
#ifndef PFR_SCRAPE_HTTP_H
#define PFR_SCRAPE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sc_fail {
    SC_OK = 0,
    SC_CONNECT,   /* no connection (refused, unreachable, DNS, TLS handshake or verification) */
    SC_TIMEOUT,   /* connected, but the response did not complete in time */
    SC_HTTP,      /* a status other than 200 */
    SC_TOO_LARGE, /* the body passed max_body */
    SC_OTHER,     /* anything else (connection reset, malformed response) */
    SC_SKIPPED,   /* not started: its group was given up (see sc_http_done_fn) */
    SC_CANCELED,  /* not started or aborted by pfr_scrape_http_cancel */
    SC_NETNS,     /* no socket in the target's network namespace (scrape_netns.h) */
};

struct sc_req {
    /* in */
    const char *url;
    int group; /* requests with the same group >= 0 share the per-group bound */
    int64_t connect_timeout_ms, timeout_ms;
    size_t max_body;
    const char *bearer;  /* "Authorization: Bearer <bearer>"; NULL = none */
    const char *ca_file; /* NULL = system store */
    bool insecure;
    /* Connect from inside this network namespace (a descriptor of /proc/PID/ns/net) instead of
     * the scraper's own; the URL's address is as seen in there. Such a connection is never
     * reused nor kept (the pool is keyed by address, not by namespace). */
    bool netns;
    int netns_fd;
    void *user;
    /* out */
    unsigned char *body; /* owned: pfr_scrape_req_clear frees it */
    size_t len, cap;
    long status;
    enum sc_fail fail;
    char error[160];
    int64_t start_ns, end_ns; /* CLOCK_REALTIME, when the transfer started and ended */
    /* private */
    void *easy;
    void *headers;
    bool too_large;
    char curl_err[256];
    int netns_err; /* errno of a failed socket in the namespace (SC_NETNS) */
    void *http;
};

/* Free a request's body and reset its outputs. */
void pfr_scrape_req_clear(struct sc_req *r);

struct sc_http;
struct sc_netns;
int pfr_scrape_http_new(struct sc_http **out);
/* Create every socket through ns (borrowed; NULL = plain sockets, netns requests fail). */
void pfr_scrape_http_set_netns(struct sc_http *h, struct sc_netns *ns);
void pfr_scrape_http_free(struct sc_http *h);

/* Called as each request finishes (with r->fail set). Returning true gives up r's group: its
 * requests not started yet finish as SC_SKIPPED. */
typedef bool (*sc_http_done_fn)(struct sc_req *r, void *ctx);

/* Run every request to completion (or cancellation). done may be NULL. Returns 0, -ECANCELED if
 * pfr_scrape_http_cancel was called, or -ENOMEM. */
int pfr_scrape_http_run(struct sc_http *h, struct sc_req *reqs, size_t n, unsigned max_parallel,
                        unsigned per_group, sc_http_done_fn done, void *ctx);

/* Make a running (or the next) pfr_scrape_http_run return soon with -ECANCELED; thread-safe. */
void pfr_scrape_http_cancel(struct sc_http *h);
/* Clear a cancellation (before a new round). */
void pfr_scrape_http_uncancel(struct sc_http *h);

#endif
