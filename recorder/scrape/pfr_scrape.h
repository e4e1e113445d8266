/*
 * pfr_scrape: pull-mode profiles from Go programs that serve net/http/pprof.
 *
 * Every scrape interval (default 60 s) a round:
 *   1. finds targets: the static list (pfr_scrape_add_target / pfr_scrape_set_targets), the
 *      annotated pods of a Kubernetes node (opts.k8s), and, when neither is configured, Go
 *      processes of this host that link net/http/pprof and listen on TCP (local discovery);
 *   2. fetches /debug/pprof/{profile?seconds=N, heap, goroutine, block, mutex} of every target
 *      whose endpoint is not backed off, in parallel (opts.max_parallel in all, at most
 *      opts.per_target_parallel per target), with a bounded, time-limited libcurl client;
 *   3. decodes each body (pfr_profile_decode; a body that is not pprof is rejected and nothing
 *      is written), renames its sample types as Coroot names them (go:heap_alloc_space:bytes,
 *      ...; the CPU "samples" column is dropped), turns the cumulative series (heap alloc_*,
 *      block, mutex) into deltas since the previous scrape keyed by stack, and queues one
 *      profile per (target, endpoint) with the target's service, labels and [start, end).
 * The daemon drains the queue from its own loop (pfr_scrape_collect or pfr_scrape_store).
 *
 * Driving: pfr_scrape_start() runs rounds in a thread owned by the scraper; pfr_scrape_run_once()
 * runs one round in the caller's thread instead (tests, or a daemon with its own thread).
 *
 * Errors: functions return 0 or a negative errno; those taking err/errlen write a reason there.
 * The library never logs: what deserves a log line is reported through opts.event (once per
 * backoff step of a failing target, not once per failure).
 *
 * Threading: pfr_scrape_collect, pfr_scrape_store, the target setters, the accessors and
 * pfr_scrape_stop may be called from any thread while the scrape thread runs. opts.event and
 * the discovery callbacks are called from the thread running the round.
 *
 * libcurl: pfr_scrape_new calls curl_global_init(); a daemon that starts threads of its own
 * before creating the scraper should call curl_global_init() itself first.
 */
#ifndef PFR_SCRAPE_H
#define PFR_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pfr_profile.h"
#include "pfr_k8s_pods.h"
#include "pfr_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_scrape pfr_scrape;

#define PFR_SCRAPE_DEFAULT_INTERVAL_NS (60ll * 1000000000ll)
#define PFR_SCRAPE_DEFAULT_CPU_SECONDS 10

/* The profile endpoints, in the order a round starts them (CPU first: it takes seconds). */
enum pfr_scrape_endpoint {
    PFR_SCRAPE_CPU = 0, /* /debug/pprof/profile?seconds=N */
    PFR_SCRAPE_HEAP,
    PFR_SCRAPE_GOROUTINE,
    PFR_SCRAPE_BLOCK,
    PFR_SCRAPE_MUTEX,
    PFR_SCRAPE_NUM_ENDPOINTS
};
#define PFR_SCRAPE_ALL_ENDPOINTS ((1u << PFR_SCRAPE_NUM_ENDPOINTS) - 1)
/* "cpu", "heap", "goroutine", "block", "mutex"; NULL for an unknown value. */
const char *pfr_scrape_endpoint_name(enum pfr_scrape_endpoint e);
/* Parse a comma-separated list of those names ("all" = every one) into a bit mask. */
int pfr_scrape_parse_endpoints(const char *list, unsigned *mask, char *err, size_t errlen);

/* The sample type names written (Coroot's names). */
#define PFR_SCRAPE_TYPE_CPU                "go:profile_cpu:nanoseconds"
#define PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS "go:heap_alloc_objects:count"
#define PFR_SCRAPE_TYPE_HEAP_ALLOC_SPACE   "go:heap_alloc_space:bytes"
#define PFR_SCRAPE_TYPE_HEAP_INUSE_OBJECTS "go:heap_inuse_objects:count"
#define PFR_SCRAPE_TYPE_HEAP_INUSE_SPACE   "go:heap_inuse_space:bytes"
#define PFR_SCRAPE_TYPE_GOROUTINES         "go:goroutine_goroutine:count"
#define PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS  "go:block_contentions:count"
#define PFR_SCRAPE_TYPE_BLOCK_DELAY        "go:block_delay:nanoseconds"
#define PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS  "go:mutex_contentions:count"
#define PFR_SCRAPE_TYPE_MUTEX_DELAY        "go:mutex_delay:nanoseconds"

/* Where a target came from. */
enum pfr_scrape_source { PFR_SCRAPE_STATIC = 0, PFR_SCRAPE_KUBERNETES, PFR_SCRAPE_LOCAL };
const char *pfr_scrape_source_name(enum pfr_scrape_source s);

/* Local discovery: AUTO = on when there are no static targets and no Kubernetes source. */
enum pfr_scrape_local_mode { PFR_SCRAPE_LOCAL_AUTO = 0, PFR_SCRAPE_LOCAL_ON, PFR_SCRAPE_LOCAL_OFF };
/* "auto" | "on" | "off" (also "true"/"false"); -EINVAL otherwise. */
int pfr_scrape_parse_local_mode(const char *s, enum pfr_scrape_local_mode *out);

/* Local discovery of processes in other network namespaces (containers without host
 * networking): AUTO = connect from inside their namespace (setns, needs CAP_SYS_ADMIN) when
 * permitted, else skip them (reported once); OFF = always skip them. */
enum pfr_scrape_netns_mode { PFR_SCRAPE_NETNS_AUTO = 0, PFR_SCRAPE_NETNS_OFF };
/* "auto" | "off" (also "on"/"true" = auto, "false" = off); -EINVAL otherwise. */
int pfr_scrape_parse_netns_mode(const char *s, enum pfr_scrape_netns_mode *out);

/* A static target. url is the program's base URL ("http://10.0.0.5:6060"); the endpoints are
 * <url>/debug/pprof/<name>, or <url>/<name> when url already ends in /debug/pprof. The labels
 * instance (host:port of the URL, unless given) and those listed are written on every profile. */
typedef struct pfr_scrape_target {
    const char *url;
    const char *service; /* service.name; required */
    const pfr_kv *labels;
    size_t nlabels;
} pfr_scrape_target;

/* Parse a config value "URL service=NAME [key=value ...]" (whitespace-separated; service is
 * required; keys are [A-Za-z_][A-Za-z0-9_.]*, values non-empty). *out and every string it points
 * to are one allocation owned by the caller: free(*out). -EINVAL with a reason on bad syntax. */
int pfr_scrape_parse_target(const char *line, pfr_scrape_target **out, char *err, size_t errlen);

/* Kubernetes discovery: the pod list of this node, from the kubelet or from the API server,
 * through a client lent (pods: the recorder's, shared with the identities' resolver) or one of
 * the scraper's own (made from list: pfr_k8s_pods.h). */
typedef struct pfr_scrape_k8s_opts {
    /* The pod list's client (borrowed, started; outlives the scraper); NULL: the scraper makes
     * its own from list when list names one (pfr_k8s_pods_configured). */
    struct pfr_k8s_pods *pods;
    /* Its own client's: kubelet_url or apiserver_url (with node_name, or this struct's), token,
     * CA, insecure, pods_json_file; timeout_ms 0 = the scraper's, refresh_ms 0 = its interval,
     * min_refresh_ms 0 = none (a round that asks gets a fetch). */
    pfr_k8s_pods_opts list;
    const char *node_name; /* only pods of this node; NULL = every pod listed */
} pfr_scrape_k8s_opts;

/* Something worth a log line, reported from the thread running the round. Strings are valid
 * during the callback only. */
enum pfr_scrape_event_kind {
    PFR_SCRAPE_EV_TARGET_ADDED = 1,
    PFR_SCRAPE_EV_TARGET_REMOVED,
    PFR_SCRAPE_EV_FAILED,          /* a target or endpoint failed; once per backoff step */
    PFR_SCRAPE_EV_RECOVERED,       /* ... and succeeded again */
    PFR_SCRAPE_EV_RESTARTED,       /* a cumulative series went down: the target restarted */
    PFR_SCRAPE_EV_DISCOVERY_ERROR, /* Kubernetes pod list or /proc could not be read */
    PFR_SCRAPE_EV_QUEUE_FULL,      /* profiles dropped because nobody collected them */
};

typedef struct pfr_scrape_event {
    enum pfr_scrape_event_kind kind;
    const char *url;     /* the target's base URL ("" for discovery errors) */
    const char *service; /* "" if none */
    int endpoint;        /* an enum pfr_scrape_endpoint, or -1 for the whole target */
    int err;             /* negative errno (0 for informational events) */
    const char *msg;     /* reason, "" if none */
    unsigned consecutive_failures;
    int64_t backoff_ns; /* FAILED: how long until the next attempt */
} pfr_scrape_event;

typedef struct pfr_scrape_opts {
    int64_t interval_ns;          /* between rounds; 0 = 60 s */
    int cpu_seconds;              /* CPU profile length; 0 = 10; negative = no CPU profile */
    unsigned endpoints;           /* bit (1u << endpoint) per endpoint; 0 = all */
    unsigned max_parallel;        /* transfers in flight in all; 0 = 16 */
    unsigned per_target_parallel; /* transfers in flight per target; 0 = 2 */
    int64_t connect_timeout_ms;   /* 0 = 3000 */
    int64_t timeout_ms;    /* whole request, added to cpu_seconds for the CPU profile; 0 = 20000 */
    size_t max_body_bytes; /* largest response body accepted; 0 = 32 MiB */
    size_t max_decoded_bytes; /* largest decompressed profile; 0 = 256 MiB */
    const char *ca_file;      /* CA bundle for https targets; NULL = system store */
    bool insecure;            /* skip TLS verification of targets (default: verify) */
    int64_t backoff_max_ns;   /* longest wait after repeated failures; 0 = 16 x interval */
    size_t max_targets;       /* 0 = 1000; discovered targets beyond are ignored (counted) */
    size_t max_queued;        /* profiles awaiting collection; 0 = 4096, the oldest dropped */

    /* Local discovery. */
    enum pfr_scrape_local_mode local;
    enum pfr_scrape_netns_mode other_netns;
    const char *proc_root; /* NULL = "/proc" */
    /* Name the service of a discovered process (the daemon's naming): write it into buf and its
     * container id into container_id ("" = none; the target's container.id label), and return
     * 0, or return non-zero for the default (the executable's base name). May be NULL. */
    int (*service_for_pid)(void *ctx, pid_t pid, char *buf, size_t len, char *container_id,
                           size_t cidlen);
    /* This host's node name as Coroot knows it (the host name the node agent reports): a
     * discovered process with a container id outside Kubernetes also gets the namespace and
     * pod labels of its Coroot instance (pfr_identity_coroot_instance), which Coroot's
     * per-instance view filters pulled profiles by. NULL or "" = Swarm and Nomad ids only. */
    const char *node_name;
    /* May this process be probed? NULL = every process but this one. */
    bool (*allow_pid)(void *ctx, pid_t pid);
    void *discovery_ctx;
    /* The /proc scan shared with the daemon's other sources (borrowed), and how old a scan may
     * be to serve a round; NULL: a scan of its own each round. */
    struct pfr_exe_scan *exes;
    int64_t exes_max_age_ns;
    /* Executables on remote file systems are read only as copies its workers make
     * (pfr_fsguard.h); NULL: opened directly. Borrowed. */
    struct pfr_fsguard *fsguard;

    pfr_scrape_k8s_opts k8s;

    void (*event)(void *ctx, const pfr_scrape_event *ev); /* may be NULL */
    void *event_ctx;
} pfr_scrape_opts;

/* Create a scraper (not started). opts is copied (strings included). */
int pfr_scrape_new(const pfr_scrape_opts *opts, pfr_scrape **out, char *err, size_t errlen);
/* Stop the thread if running and free everything, queued profiles included. */
void pfr_scrape_free(pfr_scrape *s);

/* Add one static target (copied). -EINVAL with a reason for a bad URL, service or label;
 * -EEXIST when the same URL, service and labels are already listed. */
int pfr_scrape_add_target(pfr_scrape *s, const pfr_scrape_target *t, char *err, size_t errlen);
/* Parse a config line (pfr_scrape_parse_target) and add it. */
int pfr_scrape_add_target_line(pfr_scrape *s, const char *line, char *err, size_t errlen);
/* Replace the whole static list at once (configuration reload); targets that stay keep their
 * delta state and backoff. All or nothing: on error the old list stays. */
int pfr_scrape_set_targets(pfr_scrape *s, const pfr_scrape_target *t, size_t n, char *err,
                           size_t errlen);

/* Run rounds every interval in a thread of the scraper's own (first round at once). 0;
 * -EALREADY if the thread runs already; -EBUSY while pfr_scrape_run_once() runs elsewhere. */
int pfr_scrape_start(pfr_scrape *s);
/* Stop the thread; a round in progress is abandoned within about 100 ms. Idempotent. */
void pfr_scrape_stop(pfr_scrape *s);
/* One round in the caller's thread: discovery, then every due endpoint of every target.
 * Returns when all transfers are done. -EBUSY if the thread is running. */
int pfr_scrape_run_once(pfr_scrape *s);

/* What a round produced, oldest first. emit has the recorder's pfr_emit_fn signature: called
 * for each queued profile; the chunk (and its profile) is valid during the call only. A non-zero
 * return stops the drain: that profile and the rest stay queued and the value is returned. */
typedef int (*pfr_scrape_emit_fn)(const pfr_chunk_in *chunk, void *ctx);
int pfr_scrape_collect(pfr_scrape *s, pfr_scrape_emit_fn emit, void *ctx);
/* How many profiles are queued for pfr_scrape_collect. */
size_t pfr_scrape_queued(pfr_scrape *s);
/* Drain the queue into st with one pfr_store_append_batch (all or none). *written may be NULL. */
int pfr_scrape_store(pfr_scrape *s, pfr_store *st, size_t *written);

/* The state of one endpoint of a target. Times are unix ns (0 = never). */
typedef struct pfr_scrape_endpoint_info {
    uint64_t scrapes;  /* requests completed successfully */
    uint64_t failures; /* requests that failed */
    unsigned consecutive_failures;
    int64_t last_success_ns;
    int64_t last_error_ns;
    int64_t next_attempt_ns; /* while backed off; 0 = next round */
    char last_error[160];
    uint64_t bytes;    /* body bytes received */
    uint64_t profiles; /* profiles queued */
} pfr_scrape_endpoint_info;

/* One target as the metrics show it. Pointers are valid during the callback only. */
typedef struct pfr_scrape_target_info {
    const char *url;
    const char *service;
    const pfr_kv *labels; /* instance, namespace/pod/node for pods, and configured ones */
    size_t nlabels;
    enum pfr_scrape_source source;
    pid_t pid; /* local discovery: the process; 0 otherwise */
    /* The whole target: connection failures back it off as a whole. */
    uint64_t failures;             /* all failed requests (connection failures included) */
    unsigned consecutive_failures; /* connection failures in a row */
    int64_t last_success_ns;       /* newest success of any endpoint */
    int64_t last_error_ns;
    int64_t next_attempt_ns;
    const char *last_error; /* newest error of the target or any endpoint; "" if none */
    pfr_scrape_endpoint_info endpoints[PFR_SCRAPE_NUM_ENDPOINTS];
} pfr_scrape_target_info;

/* Call cb for every current target (under the scraper's lock: cb must not call pfr_scrape). A
 * non-zero return from cb stops the walk and is returned. */
int pfr_scrape_targets(pfr_scrape *s, int (*cb)(const pfr_scrape_target_info *t, void *ctx),
                       void *ctx);

typedef struct pfr_scrape_stats {
    uint64_t rounds;
    uint64_t requests;            /* profile requests completed (any outcome) */
    uint64_t failures;            /* of which failed: */
    uint64_t connect_errors;      /*   could not connect (or TLS handshake failed) */
    uint64_t timeouts;            /*   connected, but the body did not arrive in time */
    uint64_t http_errors;         /*   status other than 200 */
    uint64_t too_large;           /*   body above max_body_bytes */
    uint64_t invalid;             /*   not a pprof profile, or not the one asked for */
    uint64_t other_errors;        /*   connection reset, malformed HTTP, out of memory */
    uint64_t skipped_backoff;     /* endpoint requests not made because of a backoff */
    uint64_t bytes;               /* body bytes received */
    uint64_t profiles;            /* profiles queued */
    uint64_t emitted;             /* profiles handed to collect/store */
    uint64_t dropped;             /* profiles dropped from a full queue */
    uint64_t restarts;            /* cumulative series that went down */
    uint64_t targets;             /* current targets */
    uint64_t targets_ignored;     /* discovered beyond max_targets */
    uint64_t discovery_errors;    /* failed pod list fetches, unreadable /proc */
    uint64_t k8s_pods;            /* pods in the last pod list */
    uint64_t k8s_bad_annotations; /* annotated pods skipped: bad port, no IP (last list) */
    uint64_t local_processes;     /* Go processes linking net/http/pprof seen (last round) */
    uint64_t local_probes;        /* /debug/pprof/ probes made */
    uint64_t local_other_netns;   /* candidates in another network namespace (last round) */
    uint64_t local_netns_skipped; /*   of which skipped: off, not permitted (last round) */
    uint64_t local_opted_out;     /* of them, refusing profiling: never scraped (cumulative) */
    uint64_t netns_failures;      /* requests failed: no socket in the target's namespace */
    uint64_t netns_denied;        /* setns refused for lack of permission (then no more tries) */
    uint64_t netns_broken;        /* 1: the scrape thread could not return to its namespace */
    int64_t last_round_ns;        /* duration of the last round */
} pfr_scrape_stats;
void pfr_scrape_get_stats(pfr_scrape *s, pfr_scrape_stats *st);

#ifdef __cplusplus
}
#endif
#endif
