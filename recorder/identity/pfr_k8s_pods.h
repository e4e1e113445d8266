/*
 * pfr_k8s_pods: the one client of this node's Kubernetes pod list (the kubelet's GET /pods or
 * the API server's GET /api/v1/pods?fieldSelector=spec.nodeName=<node>, or a file), shared by
 * whoever needs it: the identities' resolver (runtime id -> pod, pfr_identity.h) and pprof
 * scrape discovery (annotated pods -> targets, pfr_scrape.h). The recorder's daemon owns one and
 * lends it to both; a resolver or scraper made on its own (tests, tools) makes its own.
 *
 * One fetch timer: the client's thread fetches at start, then refresh_ms after the last fetch
 * began, whoever asked for it; a consumer that needs a fresher list asks (pfr_k8s_pods_get), and
 * its fetch also moves the timer. Fetches asked for start at once but are never closer than
 * min_refresh_ms: a list fetched within min_refresh_ms is fresh to anyone.
 *
 * One token check, the stricter of the two the consumers had: the bearer token file is read at
 * every fetch (tokens rotate), trailing whitespace dropped, and a token holding any other
 * control character (a header line break, a NUL, a tab) is refused (the resolver's check
 * refused only line breaks).
 *
 * The client does not parse the list: each consumer reads what it needs from the same text.
 * A list is immutable and reference counted; the latest successful fetch's stays until a newer
 * one replaces it (a failed fetch keeps it).
 *
 * Threads: every function but new/start/subscribe/free may be called from any thread.
 */
#ifndef PFR_K8S_PODS_H
#define PFR_K8S_PODS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_k8s_pods pfr_k8s_pods;
struct pfr_k8s_podlist;

typedef struct pfr_k8s_pods_opts {
    /* Kubelet base URL, e.g. "https://127.0.0.1:10250" (GET <url>/pods), or the API server's,
     * e.g. "https://kubernetes.default.svc" (needs node_name); exclusive. */
    const char *kubelet_url;
    const char *apiserver_url;
    const char *node_name;
    const char *token_file;     /* bearer token, re-read at every fetch; NULL = none */
    const char *ca_file;        /* NULL = the system store */
    bool insecure;              /* skip TLS verification */
    const char *pods_json_file; /* read the list from this file instead (tests, debugging) */
    /* Timing; 0 = the default given. */
    int64_t timeout_ms;     /* one fetch: 10000 (its connection: half) */
    int64_t refresh_ms;     /* the periodic fetch: 60000 */
    int64_t min_refresh_ms; /* fetches asked for, at most this often: 5000; < 0 = no limit */
} pfr_k8s_pods_opts;

/* Whether o names a pod list at all (a URL or a file). */
bool pfr_k8s_pods_configured(const pfr_k8s_pods_opts *o);

/* Create a client of the list o names (strings copied); it fetches nothing before
 * pfr_k8s_pods_start. -EINVAL with a reason in err for options that name no list or a bad one
 * (both URLs, an empty one, the API server without node_name), -ENOMEM. */
int pfr_k8s_pods_new(const pfr_k8s_pods_opts *o, pfr_k8s_pods **out, char *err, size_t errlen);

/* Called on the client's thread after every fetch, with the list it got (NULL when it failed)
 * and its result (0 or a negative errno, with a reason in err). The list is only lent for the
 * call (take a reference with pfr_k8s_podlist_ref to keep it). */
typedef void (*pfr_k8s_pods_fetched_fn)(void *ctx, const struct pfr_k8s_podlist *list, int rc,
                                        const char *err);
/* Add a subscriber, before pfr_k8s_pods_start (at most 4). -EBUSY after the start or when
 * full. */
int pfr_k8s_pods_subscribe(pfr_k8s_pods *p, pfr_k8s_pods_fetched_fn fn, void *ctx);
/* Remove it (any time): when this returns, fn is not running and will not be called again. */
void pfr_k8s_pods_unsubscribe(pfr_k8s_pods *p, pfr_k8s_pods_fetched_fn fn, void *ctx);

/* Start the thread; its first fetch begins at once. 0 or a negative errno. */
int pfr_k8s_pods_start(pfr_k8s_pods *p);

/* Stop the thread (a fetch in flight is aborted within about a second) and free the client,
 * after every consumer is gone. NULL is a no-op. */
void pfr_k8s_pods_free(pfr_k8s_pods *p);

/* A fetched list: the PodList's text, NUL-terminated. */
typedef struct pfr_k8s_podlist {
    const char *json;
    size_t len;
    uint64_t seq; /* the number of the fetch that got it (1 = the first); grows with each */
} pfr_k8s_podlist;

/* The latest list (a reference: pfr_k8s_podlist_unref it), or NULL when no fetch succeeded yet;
 * *rc (may be NULL) the result of the last fetch it waited for, or of the last one, with a reason
 * in err (may be NULL). max_age_ns < 0: never waits. Otherwise, unless a fetch began within
 * max_age_ns or min_refresh_ms, whichever is longer, one is asked for; then the call waits for
 * that fetch (or the one in flight that began then) to end, at most its timeout and a second,
 * or until *stop (may be NULL) is true and pfr_k8s_pods_wake is called. */
pfr_k8s_podlist *pfr_k8s_pods_get(pfr_k8s_pods *p, int64_t max_age_ns, const atomic_bool *stop,
                                  int *rc, char *err, size_t errlen);
pfr_k8s_podlist *pfr_k8s_podlist_ref(const pfr_k8s_podlist *l);
void pfr_k8s_podlist_unref(pfr_k8s_podlist *l); /* NULL is a no-op */

/* Wake the calls waiting in pfr_k8s_pods_get, so that those whose stop flag is now true
 * return (a consumer stopping: set its flag, then call this). */
void pfr_k8s_pods_wake(pfr_k8s_pods *p);

#endif
