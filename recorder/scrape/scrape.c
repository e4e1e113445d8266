/* pfr_scrape: the scraper (see pfr_scrape.h): options, targets, rounds, the queue, the thread. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "scrape_convert.h"
#include "scrape_http.h"
#include "scrape_internal.h"
#include "pfr_k8s_pods.h"
#include "scrape_k8s.h"
#include "scrape_local.h"
#include "scrape_netns.h"

#define PROBE_CONNECT_MS 1000
#define PROBE_TIMEOUT_MS 3000
#define PROBE_MAX_BODY   (1u << 20)

struct sc_ep {
    pfr_scrape_endpoint_info info;
    struct sc_backoff bo;
    struct sc_series series;
    int64_t last_end_ns; /* end of the previous successful scrape (unix ns) */
};

struct sc_target {
    struct sc_want w;
    char *urls[PFR_SCRAPE_NUM_ENDPOINTS];
    struct sc_backoff bo; /* connection failures: the whole target waits */
    uint64_t failures;
    int64_t last_success_ns, last_error_ns;
    char last_error[SC_ERROR_LEN];
    struct sc_ep ep[PFR_SCRAPE_NUM_ENDPOINTS];
    bool down;    /* a connection failure this round */
    int netns_fd; /* local target in another network namespace: /proc/PID/ns/net; else -1 */
};

/* A profile waiting for collection; service and labels live in block. */
struct sc_item {
    pfr_chunk_in chunk;
    pfr_profile *profile;
    void *block;
};

struct pfr_scrape {
    /* settings (strings owned) */
    int64_t interval, backoff_max, connect_ms, timeout_ms;
    int cpu_seconds;
    unsigned endpoints, max_parallel, per_target;
    size_t max_body, max_decoded, max_targets, max_queued;
    char *ca_file;
    bool insecure;
    enum pfr_scrape_local_mode local_mode;
    char *proc_root;
    pfr_exe_scan *exes, *own_exes; /* the shared /proc scan; own_exes when none was given */
    int64_t exes_max_age_ns;
    struct pfr_fsguard *fsguard; /* borrowed; NULL: executables opened directly */
    int (*service_for_pid)(void *, pid_t, char *, size_t, char *, size_t);
    char *node_name; /* local targets' Coroot instances: NULL = none */
    bool (*allow_pid)(void *, pid_t);
    void *discovery_ctx;
    char *k8s_node;                     /* only this node's pods; NULL = every pod listed */
    struct pfr_k8s_pods *k8s, *own_k8s; /* the pod list's client: borrowed, or own_k8s */
    atomic_bool k8s_stop;               /* a stop ends the round's wait for the pod list */
    void (*event)(void *, const pfr_scrape_event *);
    void *event_ctx;

    pthread_mutex_t mu;
    struct sc_wantlist statics; /* under mu */
    struct sc_target **targets; /* written by the round thread under mu */
    size_t ntargets;
    struct sc_item *queue; /* ring of max_queued, under mu */
    size_t qhead, qlen;
    bool queue_full_told;
    pfr_scrape_stats stats; /* under mu */

    /* the round's own */
    struct sc_http *http;
    struct sc_local *local;
    struct sc_netns netns; /* entering other network namespaces (scrape_netns.h) */
    bool netns_denied_told, netns_broken_told;
    struct sc_wantlist k8s_last; /* the targets of the list k8s_seq */
    uint64_t k8s_seq;            /* the pod list last parsed (0 = none) */
    int k8s_parse_rc;            /* its parser's result, with the reason in k8s_parse_err */
    char k8s_parse_err[256];
    struct sc_backoff k8s_bo, local_bo;
    int64_t round_start; /* CLOCK_MONOTONIC: backoffs count from the round, not the failure */
    atomic_bool in_round;

    pthread_t thread;
    bool running;
    bool stop; /* under mu */
    pthread_cond_t cv;
};

/* ---- small things ---- */

static void emit_event(pfr_scrape *s, enum pfr_scrape_event_kind kind, const struct sc_target *t,
                       int ep, int err, const char *msg, const struct sc_backoff *bo)
{
    if (!s->event)
        return;
    pfr_scrape_event ev = {
        .kind = kind,
        .url = t ? t->w.base : "",
        .service = t ? t->w.service : "",
        .endpoint = ep,
        .err = err,
        .msg = msg ? msg : "",
        .consecutive_failures = bo ? bo->consecutive : 0,
        .backoff_ns = bo ? bo->delay_ns : 0,
    };
    s->event(s->event_ctx, &ev);
}

static char *dup_opt(const char *v, bool *ok)
{
    if (!v)
        return NULL;
    char *c = strdup(v);
    if (!c)
        *ok = false;
    return c;
}

static void target_free(struct sc_target *t)
{
    if (!t)
        return;
    pfr_scrape_want_free(&t->w);
    if (t->netns_fd >= 0)
        close(t->netns_fd);
    for (int i = 0; i < PFR_SCRAPE_NUM_ENDPOINTS; i++) {
        free(t->urls[i]);
        pfr_scrape_series_free(&t->ep[i].series);
    }
    free(t);
}

static void item_free(struct sc_item *it)
{
    pfr_profile_free(it->profile);
    free(it->block);
    memset(it, 0, sizeof(*it));
}

/* ---- life cycle ---- */

/* The pod list's client: the one lent, or the scraper's own when the options name a list (it
 * fetches whenever a round asks: no rate limit but the round's own backoff). */
static int k8s_client(pfr_scrape *s, const pfr_scrape_k8s_opts *k, char *err, size_t errlen)
{
    s->k8s = k->pods;
    pfr_k8s_pods_opts ko = k->list;
    if (!ko.node_name)
        ko.node_name = k->node_name;
    if (!ko.timeout_ms)
        ko.timeout_ms = s->timeout_ms;
    if (!ko.refresh_ms)
        ko.refresh_ms = s->interval / SC_NS_PER_MSEC;
    if (!ko.min_refresh_ms)
        ko.min_refresh_ms = -1;
    if (s->k8s || !pfr_k8s_pods_configured(&ko))
        return 0;
    char why[200];
    int rc = pfr_k8s_pods_new(&ko, &s->own_k8s, why, sizeof(why));
    if (rc == 0 && (rc = pfr_k8s_pods_start(s->own_k8s)) != 0)
        snprintf(why, sizeof(why), "cannot start its thread: %s", strerror(-rc));
    if (rc) {
        pfr_scrape_errf(err, errlen, "kubernetes: %s", why);
        return rc;
    }
    s->k8s = s->own_k8s;
    return 0;
}

int pfr_scrape_new(const pfr_scrape_opts *opts, pfr_scrape **out, char *err, size_t errlen)
{
    static const pfr_scrape_opts defaults;
    const pfr_scrape_opts *o = opts ? opts : &defaults;
    *out = NULL;
    if (o->interval_ns < 0 || o->connect_timeout_ms < 0 || o->timeout_ms < 0 ||
        o->backoff_max_ns < 0 || o->cpu_seconds > 3600 ||
        (o->endpoints & ~PFR_SCRAPE_ALL_ENDPOINTS)) {
        pfr_scrape_errf(err, errlen, "scrape: bad option value");
        return -EINVAL;
    }
    pfr_scrape *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    /* the namespace to come back to: the creating thread's, which is the process's */
    pfr_scrape_netns_init(&s->netns, o->other_netns != PFR_SCRAPE_NETNS_OFF);
    /* from here on pfr_scrape_free undoes everything */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->in_round, false);

    s->interval = o->interval_ns ? o->interval_ns : PFR_SCRAPE_DEFAULT_INTERVAL_NS;
    s->cpu_seconds = o->cpu_seconds ? o->cpu_seconds : PFR_SCRAPE_DEFAULT_CPU_SECONDS;
    s->endpoints = o->endpoints ? o->endpoints : PFR_SCRAPE_ALL_ENDPOINTS;
    if (s->cpu_seconds < 0)
        s->endpoints &= ~(1u << PFR_SCRAPE_CPU);
    if ((s->endpoints & (1u << PFR_SCRAPE_CPU)) &&
        (int64_t)s->cpu_seconds * SC_NS_PER_SEC > s->interval) {
        pfr_scrape_errf(err, errlen,
                        "scrape: the CPU profile (%d s) must not be longer than the interval",
                        s->cpu_seconds);
        pfr_scrape_free(s);
        return -EINVAL;
    }
    s->max_parallel = o->max_parallel ? o->max_parallel : 16;
    s->per_target = o->per_target_parallel ? o->per_target_parallel : 2;
    s->connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 3000;
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : 20000;
    s->max_body = o->max_body_bytes ? o->max_body_bytes : 32u << 20;
    s->max_decoded = o->max_decoded_bytes ? o->max_decoded_bytes : 256u << 20;
    s->backoff_max = o->backoff_max_ns ? o->backoff_max_ns : 16 * s->interval;
    if (s->backoff_max < s->interval)
        s->backoff_max = s->interval;
    s->max_targets = o->max_targets ? o->max_targets : 1000;
    s->max_queued = o->max_queued ? o->max_queued : 4096;
    s->insecure = o->insecure;
    s->local_mode = o->local;
    s->service_for_pid = o->service_for_pid;
    s->allow_pid = o->allow_pid;
    s->discovery_ctx = o->discovery_ctx;
    s->event = o->event;
    s->event_ctx = o->event_ctx;
    s->fsguard = o->fsguard;
    bool ok = true;
    s->ca_file = dup_opt(o->ca_file, &ok);
    s->proc_root = dup_opt(o->proc_root ? o->proc_root : "/proc", &ok);
    s->node_name = dup_opt(o->node_name, &ok);
    s->k8s_node = dup_opt(o->k8s.node_name, &ok);
    s->queue = calloc(s->max_queued, sizeof(*s->queue));
    atomic_init(&s->k8s_stop, false);
    int rc = ok && s->queue ? k8s_client(s, &o->k8s, err, errlen) : -ENOMEM;
    if (!rc)
        rc = pfr_scrape_http_new(&s->http);
    if (!rc)
        pfr_scrape_http_set_netns(s->http, &s->netns);
    s->exes = o->exes;
    s->exes_max_age_ns = o->exes_max_age_ns;
    if (!rc && !s->exes) {
        rc = pfr_exe_scan_new(s->proc_root, &s->own_exes);
        s->exes = s->own_exes;
        s->exes_max_age_ns = 0;
    }
    if (rc) {
        pfr_scrape_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void pfr_scrape_free(pfr_scrape *s)
{
    if (!s)
        return;
    pfr_scrape_stop(s);
    pfr_k8s_pods_free(s->own_k8s);
    for (size_t i = 0; i < s->ntargets; i++)
        target_free(s->targets[i]);
    free(s->targets);
    for (size_t i = 0; s->queue && i < s->qlen; i++)
        item_free(&s->queue[(s->qhead + i) % s->max_queued]);
    free(s->queue);
    pfr_scrape_wantlist_free(&s->statics);
    pfr_scrape_wantlist_free(&s->k8s_last);
    pfr_scrape_local_free(s->local);
    pfr_exe_scan_free(s->own_exes);
    pfr_scrape_http_free(s->http);
    pfr_scrape_netns_close(&s->netns);
    curl_global_cleanup();
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ca_file);
    free(s->proc_root);
    free(s->node_name);
    free(s->k8s_node);
    free(s);
}

/* ---- static targets ---- */

int pfr_scrape_add_target(pfr_scrape *s, const pfr_scrape_target *t, char *err, size_t errlen)
{
    struct sc_want w;
    int rc = pfr_scrape_want_make(&w, t->url, t->service, t->labels, t->nlabels, PFR_SCRAPE_STATIC,
                                  0, 0, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->mu);
    if (pfr_scrape_wantlist_find(&s->statics, w.key) >= 0) {
        pfr_scrape_errf(err, errlen, "target %s (service %s) is listed twice", w.base, w.service);
        pfr_scrape_want_free(&w);
        rc = -EEXIST;
    } else {
        rc = pfr_scrape_wantlist_push(&s->statics, &w);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int pfr_scrape_add_target_line(pfr_scrape *s, const char *line, char *err, size_t errlen)
{
    pfr_scrape_target *t;
    int rc = pfr_scrape_parse_target(line, &t, err, errlen);
    if (rc)
        return rc;
    rc = pfr_scrape_add_target(s, t, err, errlen);
    free(t);
    return rc;
}

int pfr_scrape_set_targets(pfr_scrape *s, const pfr_scrape_target *t, size_t n, char *err,
                           size_t errlen)
{
    struct sc_wantlist fresh = {0};
    for (size_t i = 0; i < n; i++) {
        struct sc_want w;
        int rc = pfr_scrape_want_make(&w, t[i].url, t[i].service, t[i].labels, t[i].nlabels,
                                      PFR_SCRAPE_STATIC, 0, 0, err, errlen);
        if (!rc && pfr_scrape_wantlist_find(&fresh, w.key) >= 0) {
            pfr_scrape_errf(err, errlen, "target %s (service %s) is listed twice", w.base,
                            w.service);
            pfr_scrape_want_free(&w);
            rc = -EEXIST;
        }
        if (!rc)
            rc = pfr_scrape_wantlist_push(&fresh, &w);
        if (rc) {
            pfr_scrape_wantlist_free(&fresh);
            return rc;
        }
    }
    pthread_mutex_lock(&s->mu);
    struct sc_wantlist old = s->statics;
    s->statics = fresh;
    pthread_mutex_unlock(&s->mu);
    pfr_scrape_wantlist_free(&old);
    return 0;
}

/* ---- discovery ---- */

static bool k8s_configured(const pfr_scrape *s)
{
    return s->k8s != NULL;
}

/* Parse the pod list l into k8s_last unless it was (its result kept for the rounds after). */
static void take_pods(pfr_scrape *s, const pfr_k8s_podlist *l)
{
    if (l->seq == s->k8s_seq)
        return;
    struct sc_wantlist fresh = {0};
    struct sc_k8s_counts c = {0};
    s->k8s_seq = l->seq;
    s->k8s_parse_rc = pfr_scrape_k8s_parse_pods(l->json, l->len, s->k8s_node, &fresh, &c,
                                                s->k8s_parse_err, sizeof(s->k8s_parse_err));
    if (s->k8s_parse_rc) { /* the targets of the last good list stay */
        pfr_scrape_wantlist_free(&fresh);
        return;
    }
    pfr_scrape_wantlist_free(&s->k8s_last);
    s->k8s_last = fresh;
    pthread_mutex_lock(&s->mu);
    s->stats.k8s_pods = c.pods;
    s->stats.k8s_bad_annotations = c.bad;
    pthread_mutex_unlock(&s->mu);
}

/* The round's targets from the pod list: when the round is due (its backoff), a list as fresh as
 * the client fetches (asked for and waited for), else the latest one. */
static void discover_k8s(pfr_scrape *s, struct sc_wantlist *want)
{
    char err[256] = "";
    int64_t now = s->round_start;
    bool due = pfr_scrape_backoff_due(&s->k8s_bo, now, s->interval);
    int rc = 0;
    pfr_k8s_podlist *l =
        pfr_k8s_pods_get(s->k8s, due ? 0 : -1, &s->k8s_stop, &rc, err, sizeof(err));
    if (l)
        take_pods(s, l);
    pfr_k8s_podlist_unref(l);
    if (rc == 0 && l && s->k8s_parse_rc) {
        rc = s->k8s_parse_rc;
        snprintf(err, sizeof(err), "%s", s->k8s_parse_err);
    }
    /* a failure counts in the rounds that asked (their backoff paces the reports); a list had
     * again ends it in any round, the one the client's own timer fetched too */
    if (rc == -ECANCELED || atomic_load(&s->k8s_stop)) {
        /* stopping: nothing to report */
    } else if (rc == 0) {
        if (pfr_scrape_backoff_ok(&s->k8s_bo))
            emit_event(s, PFR_SCRAPE_EV_RECOVERED, NULL, -1, 0, "kubernetes pod list", NULL);
    } else if (due) {
        pthread_mutex_lock(&s->mu);
        s->stats.discovery_errors++;
        pthread_mutex_unlock(&s->mu);
        if (pfr_scrape_backoff_fail(&s->k8s_bo, now, s->interval, s->backoff_max))
            emit_event(s, PFR_SCRAPE_EV_DISCOVERY_ERROR, NULL, -1, rc, err, &s->k8s_bo);
    }
    /* a failed fetch keeps the last good list: a flaky API server does not drop targets */
    for (size_t i = 0; i < s->k8s_last.n; i++)
        pfr_scrape_wantlist_push_copy(want, &s->k8s_last.v[i]);
}

/* Report once that other network namespaces cannot be entered, with the reason. */
static void check_netns(pfr_scrape *s)
{
    enum sc_netns_state st = sc_netns_get_state(&s->netns);
    pthread_mutex_lock(&s->mu);
    s->stats.netns_denied = atomic_load(&s->netns.denied);
    s->stats.netns_broken = st == SC_NETNS_BROKEN;
    pthread_mutex_unlock(&s->mu);
    char msg[400];
    if (st == SC_NETNS_DENIED && !s->netns_denied_told) {
        s->netns_denied_told = true;
        snprintf(msg, sizeof(msg),
                 "cannot enter other network namespaces (setns: %s): scraping a process in a "
                 "container needs CAP_SYS_ADMIN (and, under systemd, RestrictNamespaces= allowing "
                 "net); Go processes in other network namespaces are skipped",
                 strerror(s->netns.last_errno));
        emit_event(s, PFR_SCRAPE_EV_DISCOVERY_ERROR, NULL, -1, -EPERM, msg, NULL);
    }
    if (st == SC_NETNS_BROKEN && !s->netns_broken_told) {
        s->netns_broken_told = true;
        snprintf(msg, sizeof(msg),
                 "FATAL: the scrape thread could not return to its own network namespace "
                 "(setns: %s): it opens no more connections; restart the recorder",
                 strerror(s->netns.last_errno));
        emit_event(s, PFR_SCRAPE_EV_DISCOVERY_ERROR, NULL, -1, -ENOTRECOVERABLE, msg, NULL);
    }
}

static void discover_local(pfr_scrape *s, struct sc_wantlist *want)
{
    if (!s->local && pfr_scrape_local_new(s->proc_root, s->fsguard, &s->netns, &s->local) < 0)
        return;
    struct sc_local_scan_stats st;
    pfr_exe_list exes;
    int rc = pfr_exe_scan_get(s->exes, s->exes_max_age_ns, &exes);
    if (!rc)
        rc = pfr_scrape_local_scan(s->local, &exes, s->allow_pid, s->discovery_ctx, &st);
    pfr_exe_list_free(&exes);
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof(msg), "cannot read %s: %s", s->proc_root, strerror(-rc));
        pthread_mutex_lock(&s->mu);
        s->stats.discovery_errors++;
        pthread_mutex_unlock(&s->mu);
        if (pfr_scrape_backoff_fail(&s->local_bo, s->round_start, s->interval, s->backoff_max))
            emit_event(s, PFR_SCRAPE_EV_DISCOVERY_ERROR, NULL, -1, rc, msg, &s->local_bo);
        return;
    }
    pfr_scrape_backoff_ok(&s->local_bo);
    const struct sc_local_probe *pr;
    size_t n = pfr_scrape_local_probes(s->local, &pr);
    uint64_t nsfail = 0;
    if (n) {
        struct sc_req *reqs = calloc(n, sizeof(*reqs));
        if (!reqs)
            return;
        for (size_t i = 0; i < n; i++) {
            reqs[i] = (struct sc_req){
                .url = pr[i].url,
                .group = (int)i,
                .connect_timeout_ms = PROBE_CONNECT_MS,
                .timeout_ms = PROBE_TIMEOUT_MS,
                .max_body = PROBE_MAX_BODY,
                .netns = pr[i].netns_fd >= 0,
                .netns_fd = pr[i].netns_fd,
            };
        }
        rc = pfr_scrape_http_run(s->http, reqs, n, s->max_parallel, 1, NULL, NULL);
        for (size_t i = 0; i < n; i++) {
            nsfail += reqs[i].fail == SC_NETNS;
            if (rc == 0) {
                bool ok = reqs[i].fail == SC_OK;
                pfr_scrape_local_probe_result(s->local, &pr[i], ok ? reqs[i].body : NULL,
                                              ok ? reqs[i].len : 0);
            }
            pfr_scrape_req_clear(&reqs[i]);
        }
        free(reqs);
    }
    pthread_mutex_lock(&s->mu);
    s->stats.local_probes += n;
    s->stats.local_processes = st.processes;
    s->stats.local_other_netns = st.other_netns;
    s->stats.local_netns_skipped = st.netns_skipped;
    s->stats.local_opted_out += st.opted_out;
    s->stats.netns_failures += nsfail;
    pthread_mutex_unlock(&s->mu);
    check_netns(s);
    pfr_scrape_local_wants(s->local, s->node_name, s->service_for_pid, s->discovery_ctx, want);
}

static void discover(pfr_scrape *s, struct sc_wantlist *want)
{
    pthread_mutex_lock(&s->mu);
    size_t nstatic = s->statics.n;
    for (size_t i = 0; i < s->statics.n; i++)
        pfr_scrape_wantlist_push_copy(want, &s->statics.v[i]);
    pthread_mutex_unlock(&s->mu);
    bool k8s = k8s_configured(s);
    if (k8s)
        discover_k8s(s, want);
    if (s->local_mode == PFR_SCRAPE_LOCAL_ON ||
        (s->local_mode == PFR_SCRAPE_LOCAL_AUTO && nstatic == 0 && !k8s))
        discover_local(s, want);
}

static struct sc_target *target_new(pfr_scrape *s, struct sc_want *w)
{
    struct sc_target *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->netns_fd = -1;
    bool ok = true;
    for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS && ok; e++) {
        if (e == PFR_SCRAPE_CPU)
            ok = asprintf(&t->urls[e], "%s/profile?seconds=%d", w->base, s->cpu_seconds) >= 0;
        else
            ok = asprintf(&t->urls[e], "%s/%s", w->base, pfr_scrape_endpoint_name(e)) >= 0;
        if (!ok)
            t->urls[e] = NULL;
    }
    if (ok && w->netns) {
        /* its own descriptor of the namespace scanned (the process may be gone by now) */
        char path[512];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%d/ns/net", s->proc_root, (int)w->pid);
        t->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
        ok = t->netns_fd >= 0 && fstat(t->netns_fd, &sb) == 0 && (uint64_t)sb.st_ino == w->netns;
    }
    if (!ok) {
        target_free(t);
        return NULL;
    }
    t->w = *w;
    memset(w, 0, sizeof(*w));
    return t;
}

/* Make the target set what discovery found: targets that stay keep their state. */
static void apply_targets(pfr_scrape *s, struct sc_wantlist *want)
{
    size_t n = want->n < s->max_targets ? want->n : s->max_targets;
    struct sc_target **next = calloc(n ? n : 1, sizeof(*next));
    bool *kept = calloc(s->ntargets ? s->ntargets : 1, sizeof(*kept));
    if (!next || !kept) {
        free(next);
        free(kept);
        return; /* keep the current set */
    }
    size_t nn = 0, added_from = 0;
    struct sc_target **added = calloc(n ? n : 1, sizeof(*added));
    for (size_t i = 0; i < want->n && nn < n; i++) {
        struct sc_want *w = &want->v[i];
        bool dup = false;
        for (size_t j = 0; j < nn && !dup; j++)
            dup = strcmp(next[j]->w.key, w->key) == 0;
        if (dup)
            continue;
        struct sc_target *t = NULL;
        for (size_t j = 0; j < s->ntargets && !t; j++) {
            if (!kept[j] && strcmp(s->targets[j]->w.key, w->key) == 0) {
                kept[j] = true;
                t = s->targets[j];
            }
        }
        if (!t) {
            t = target_new(s, w);
            if (!t)
                continue;
            if (added)
                added[added_from++] = t;
        }
        next[nn++] = t;
    }
    uint64_t ignored = want->n > s->max_targets ? want->n - s->max_targets : 0;
    pthread_mutex_lock(&s->mu);
    struct sc_target **old = s->targets;
    size_t nold = s->ntargets;
    s->targets = next;
    s->ntargets = nn;
    s->stats.targets = nn;
    s->stats.targets_ignored = ignored;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < added_from; i++)
        emit_event(s, PFR_SCRAPE_EV_TARGET_ADDED, added[i], -1, 0,
                   pfr_scrape_source_name(added[i]->w.source), NULL);
    for (size_t j = 0; j < nold; j++) {
        if (kept[j])
            continue;
        emit_event(s, PFR_SCRAPE_EV_TARGET_REMOVED, old[j], -1, 0,
                   pfr_scrape_source_name(old[j]->w.source), NULL);
        target_free(old[j]);
    }
    free(old);
    free(kept);
    free(added);
}

/* ---- scraping ---- */

/* Queue a profile (the queue takes it). Called with mu held. Returns true if one was dropped. */
static bool enqueue(pfr_scrape *s, const struct sc_target *t, pfr_profile *p, int64_t start,
                    int64_t end)
{
    size_t size = strlen(t->w.service) + 1 + t->w.nlabels * sizeof(pfr_kv);
    for (size_t i = 0; i < t->w.nlabels; i++)
        size += strlen(t->w.labels[i].key) + strlen(t->w.labels[i].value) + 2;
    char *block = malloc(size);
    if (!block) {
        pfr_profile_free(p);
        return false;
    }
    pfr_kv *labels = (pfr_kv *)(void *)block;
    char *str = block + t->w.nlabels * sizeof(pfr_kv);
    for (size_t i = 0; i < t->w.nlabels; i++) {
        labels[i].key = str;
        str = stpcpy(str, t->w.labels[i].key) + 1;
        labels[i].value = str;
        str = stpcpy(str, t->w.labels[i].value) + 1;
    }
    const char *service = str;
    strcpy(str, t->w.service);
    bool dropped = false;
    if (s->qlen == s->max_queued) {
        item_free(&s->queue[s->qhead]);
        s->qhead = (s->qhead + 1) % s->max_queued;
        s->qlen--;
        s->stats.dropped++;
        dropped = true;
    }
    struct sc_item *it = &s->queue[(s->qhead + s->qlen) % s->max_queued];
    it->profile = p;
    it->block = block;
    it->chunk = (pfr_chunk_in){
        .service = service,
        .labels = labels,
        .nlabels = t->w.nlabels,
        .start_ns = start,
        .end_ns = end,
        .profile = p,
    };
    s->qlen++;
    s->stats.profiles++;
    return dropped;
}

/* The interval a profile covers. */
static void time_range(const pfr_scrape *s, const struct sc_ep *e, int ep, const struct sc_req *r,
                       const pfr_profile *p, int64_t *start, int64_t *end)
{
    *end = r->end_ns;
    if (ep == PFR_SCRAPE_CPU) {
        /* what the program says it profiled, if plausible; the target's clock is not trusted */
        int64_t d = pfr_profile_duration_nanos(p);
        if (d > 0 && d <= ((int64_t)s->cpu_seconds + 5) * SC_NS_PER_SEC)
            *start = *end - d;
        else
            *start = r->start_ns;
    } else if (pfr_scrape_convert_cumulative(ep) && e->last_end_ns > 0 && e->last_end_ns < *end) {
        *start = e->last_end_ns; /* a delta covers everything since the previous scrape */
    } else {
        *start = *end - s->interval;
        if (e->last_end_ns > *start && e->last_end_ns < *end)
            *start = e->last_end_ns;
    }
    if (*start >= *end)
        *start = *end - 1;
}

/* Decode and convert a 200 body. 0 with *p (maybe NULL), or an error in err. */
static int process_body(pfr_scrape *s, struct sc_target *t, int ep, const struct sc_req *r,
                        pfr_profile **out, int64_t *start, int64_t *end, bool *reset, char *err,
                        size_t errlen)
{
    pfr_profile *src = NULL;
    *out = NULL;
    int rc = pfr_profile_decode(r->body, r->len, s->max_decoded, &src, err, errlen);
    if (rc) {
        if (rc == -EBADMSG) {
            char why[SC_ERROR_LEN];
            snprintf(why, sizeof(why), "%s", err);
            pfr_scrape_errf(err, errlen, "not a pprof profile: %s", why);
        }
        return rc;
    }
    struct sc_ep *e = &t->ep[ep];
    time_range(s, e, ep, r, src, start, end);
    struct sc_convert_result res;
    rc = pfr_scrape_convert(ep, src, &e->series, *start, *end, &res, err, errlen);
    pfr_profile_free(src);
    if (rc)
        return rc;
    e->last_end_ns = *end;
    *reset = res.reset;
    *out = res.profile;
    return 0;
}

/* What went wrong with a request: an sc_fail, or a body that is not the profile asked for. */
#define FAIL_INVALID 100

static void count_failure(pfr_scrape *s, int f)
{
    s->stats.failures++;
    switch (f) {
    case SC_CONNECT:
        s->stats.connect_errors++;
        break;
    case SC_TIMEOUT:
        s->stats.timeouts++;
        break;
    case SC_HTTP:
        s->stats.http_errors++;
        break;
    case SC_TOO_LARGE:
        s->stats.too_large++;
        break;
    case FAIL_INVALID:
        s->stats.invalid++;
        break;
    case SC_NETNS:
        s->stats.netns_failures++;
        break;
    default:
        s->stats.other_errors++;
        break;
    }
}

static bool on_done(struct sc_req *r, void *ctx)
{
    pfr_scrape *s = ctx;
    if (r->fail == SC_SKIPPED || r->fail == SC_CANCELED)
        return false;
    uintptr_t job = (uintptr_t)r->user;
    struct sc_target *t = s->targets[job / PFR_SCRAPE_NUM_ENDPOINTS];
    int ep = (int)(job % PFR_SCRAPE_NUM_ENDPOINTS);
    struct sc_ep *e = &t->ep[ep];

    char err[SC_ERROR_LEN] = "";
    int fail = (int)r->fail;
    pfr_profile *p = NULL;
    int64_t start = 0, end = 0;
    bool reset = false;
    int rc = 0;
    if (fail == SC_OK) {
        rc = process_body(s, t, ep, r, &p, &start, &end, &reset, err, sizeof(err));
        if (rc)
            fail = rc == -EBADMSG ? FAIL_INVALID : SC_OTHER;
    } else {
        snprintf(err, sizeof(err), "%s", r->error);
    }

    int64_t now = s->round_start, real = pfr_clock_real_ns();
    bool step = false, recovered = false, give_up = false, dropped = false, t_recovered = false;
    struct sc_backoff *bo = &e->bo;
    pthread_mutex_lock(&s->mu);
    s->stats.requests++;
    s->stats.bytes += r->len;
    e->info.bytes += r->len;
    if (fail == SC_OK) {
        e->info.scrapes++;
        e->info.last_success_ns = real;
        t->last_success_ns = real;
        recovered = pfr_scrape_backoff_ok(&e->bo);
        t_recovered = pfr_scrape_backoff_ok(&t->bo);
        if (reset)
            s->stats.restarts++;
        if (p) {
            e->info.profiles++;
            dropped = enqueue(s, t, p, start, end);
        }
    } else {
        count_failure(s, fail);
        e->info.failures++;
        e->info.last_error_ns = real;
        snprintf(e->info.last_error, sizeof(e->info.last_error), "%s", err);
        t->failures++;
        t->last_error_ns = real;
        snprintf(t->last_error, sizeof(t->last_error), "%s: %s", pfr_scrape_endpoint_name(ep), err);
        if (fail == SC_CONNECT || fail == SC_NETNS) {
            /* the whole target is unreachable: one backoff for it, not one per endpoint */
            give_up = true;
            bo = &t->bo;
            if (!t->down)
                step = pfr_scrape_backoff_fail(&t->bo, now, s->interval, s->backoff_max);
            t->down = true;
        } else {
            step = pfr_scrape_backoff_fail(&e->bo, now, s->interval, s->backoff_max);
        }
        e->info.consecutive_failures = e->bo.consecutive;
    }
    if (fail == SC_OK)
        e->info.consecutive_failures = 0;
    bool tell_full = dropped && !s->queue_full_told;
    if (dropped)
        s->queue_full_told = true;
    pthread_mutex_unlock(&s->mu);

    if (fail != SC_OK && step)
        emit_event(s, PFR_SCRAPE_EV_FAILED, t, give_up ? -1 : ep, -EIO, err, bo);
    if (t_recovered)
        emit_event(s, PFR_SCRAPE_EV_RECOVERED, t, -1, 0, "", NULL);
    if (recovered)
        emit_event(s, PFR_SCRAPE_EV_RECOVERED, t, ep, 0, "", NULL);
    if (reset)
        emit_event(s, PFR_SCRAPE_EV_RESTARTED, t, ep, 0, "a cumulative series went down", NULL);
    if (tell_full)
        emit_event(s, PFR_SCRAPE_EV_QUEUE_FULL, NULL, -1, -ENOBUFS,
                   "profiles dropped: nobody collects them", NULL);
    return give_up;
}

static int scrape_targets(pfr_scrape *s)
{
    size_t cap = s->ntargets * PFR_SCRAPE_NUM_ENDPOINTS;
    if (cap == 0)
        return 0;
    struct sc_req *reqs = calloc(cap, sizeof(*reqs));
    if (!reqs)
        return -ENOMEM;
    int64_t now = s->round_start;
    size_t n = 0;
    uint64_t skipped = 0;
    for (size_t i = 0; i < s->ntargets; i++)
        s->targets[i]->down = false;
    /* endpoint-major order: every target's CPU profile starts first, as it takes seconds */
    for (int ep = 0; ep < PFR_SCRAPE_NUM_ENDPOINTS; ep++) {
        if (!(s->endpoints & (1u << ep)))
            continue;
        for (size_t i = 0; i < s->ntargets; i++) {
            struct sc_target *t = s->targets[i];
            if (!pfr_scrape_backoff_due(&t->bo, now, s->interval) ||
                !pfr_scrape_backoff_due(&t->ep[ep].bo, now, s->interval)) {
                skipped++;
                continue;
            }
            int64_t timeout = s->timeout_ms;
            if (ep == PFR_SCRAPE_CPU)
                timeout += (int64_t)s->cpu_seconds * 1000;
            reqs[n++] = (struct sc_req){
                .url = t->urls[ep],
                .group = (int)i,
                .connect_timeout_ms = s->connect_ms,
                .timeout_ms = timeout,
                .max_body = s->max_body,
                .ca_file = s->ca_file,
                .insecure = s->insecure,
                .netns = t->netns_fd >= 0,
                .netns_fd = t->netns_fd,
                .user = (void *)(uintptr_t)(i * PFR_SCRAPE_NUM_ENDPOINTS + (size_t)ep),
            };
        }
    }
    pthread_mutex_lock(&s->mu);
    s->stats.skipped_backoff += skipped;
    pthread_mutex_unlock(&s->mu);
    int rc = pfr_scrape_http_run(s->http, reqs, n, s->max_parallel, s->per_target, on_done, s);
    for (size_t i = 0; i < n; i++)
        pfr_scrape_req_clear(&reqs[i]);
    free(reqs);
    return rc;
}

static int do_round(pfr_scrape *s)
{
    int64_t t0 = pfr_clock_mono_ns();
    s->round_start = t0;
    struct sc_wantlist want = {0};
    discover(s, &want);
    apply_targets(s, &want);
    pfr_scrape_wantlist_free(&want);
    int rc = scrape_targets(s);
    check_netns(s);
    pthread_mutex_lock(&s->mu);
    s->stats.rounds++;
    s->stats.last_round_ns = pfr_clock_mono_ns() - t0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- driving ---- */

int pfr_scrape_run_once(pfr_scrape *s)
{
    bool expected = false;
    if (!atomic_compare_exchange_strong(&s->in_round, &expected, true))
        return -EBUSY;
    pthread_mutex_lock(&s->mu);
    bool running = s->running;
    pthread_mutex_unlock(&s->mu);
    int rc = running ? -EBUSY : do_round(s);
    atomic_store(&s->in_round, false);
    return rc;
}

static void *thread_main(void *arg)
{
    pfr_scrape *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        int64_t start = pfr_clock_mono_ns();
        atomic_store(&s->in_round, true);
        do_round(s);
        atomic_store(&s->in_round, false);
        int64_t next = start + s->interval;
        struct timespec ts = {.tv_sec = next / SC_NS_PER_SEC, .tv_nsec = next % SC_NS_PER_SEC};
        pthread_mutex_lock(&s->mu);
        while (!s->stop && pfr_clock_mono_ns() < next)
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int pfr_scrape_start(pfr_scrape *s)
{
    pthread_mutex_lock(&s->mu);
    /* running first: the thread's own rounds set in_round too, and a second start must say
     * "already running" whatever the thread is doing at that moment */
    if (s->running) {
        pthread_mutex_unlock(&s->mu);
        return -EALREADY;
    }
    if (atomic_load(&s->in_round)) { /* a pfr_scrape_run_once() in another thread */
        pthread_mutex_unlock(&s->mu);
        return -EBUSY;
    }
    s->stop = false;
    pfr_scrape_http_uncancel(s->http);
    int rc = pthread_create(&s->thread, NULL, thread_main, s);
    if (rc == 0) {
        s->running = true;
        pthread_setname_np(s->thread, "pfr-scrape-loop"); /* its CPU in /proc/PID/task */
    }
    pthread_mutex_unlock(&s->mu);
    return -rc;
}

void pfr_scrape_stop(pfr_scrape *s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->running) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pfr_scrape_http_cancel(s->http);
    atomic_store(&s->k8s_stop, true);
    if (s->k8s)
        pfr_k8s_pods_wake(s->k8s);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    s->running = false;
    pthread_mutex_unlock(&s->mu);
    pfr_scrape_http_uncancel(s->http);
    atomic_store(&s->k8s_stop, false);
}

/* ---- output ---- */

size_t pfr_scrape_queued(pfr_scrape *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->qlen;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int pfr_scrape_collect(pfr_scrape *s, pfr_scrape_emit_fn emit, void *ctx)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (s->qlen > 0) {
        struct sc_item *it = &s->queue[s->qhead];
        rc = emit(&it->chunk, ctx);
        if (rc)
            break;
        item_free(it);
        s->qhead = (s->qhead + 1) % s->max_queued;
        s->qlen--;
        s->stats.emitted++;
    }
    if (s->qlen == 0)
        s->queue_full_told = false;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int pfr_scrape_store(pfr_scrape *s, pfr_store *st, size_t *written)
{
    if (written)
        *written = 0;
    pthread_mutex_lock(&s->mu);
    size_t n = s->qlen;
    if (n == 0) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    pfr_chunk_in *in = malloc(n * sizeof(*in));
    if (!in) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        in[i] = s->queue[(s->qhead + i) % s->max_queued].chunk;
    int rc = pfr_store_append_batch(st, in, n, NULL);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            item_free(&s->queue[(s->qhead + i) % s->max_queued]);
        s->qhead = (s->qhead + n) % s->max_queued;
        s->qlen = 0;
        s->stats.emitted += n;
        s->queue_full_told = false;
        if (written)
            *written = n;
    }
    pthread_mutex_unlock(&s->mu);
    free(in);
    return rc;
}

/* ---- accessors ---- */

int pfr_scrape_targets(pfr_scrape *s, int (*cb)(const pfr_scrape_target_info *t, void *ctx),
                       void *ctx)
{
    int rc = 0;
    int64_t mono = pfr_clock_mono_ns(), real = pfr_clock_real_ns();
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->ntargets && !rc; i++) {
        const struct sc_target *t = s->targets[i];
        pfr_scrape_target_info info = {
            .url = t->w.base,
            .service = t->w.service,
            .labels = t->w.labels,
            .nlabels = t->w.nlabels,
            .source = t->w.source,
            .pid = t->w.pid,
            .failures = t->failures,
            .consecutive_failures = t->bo.consecutive,
            .last_success_ns = t->last_success_ns,
            .last_error_ns = t->last_error_ns,
            .next_attempt_ns = t->bo.consecutive ? t->bo.until_mono - mono + real : 0,
            .last_error = t->last_error,
        };
        for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS; e++) {
            info.endpoints[e] = t->ep[e].info;
            if (t->ep[e].bo.consecutive)
                info.endpoints[e].next_attempt_ns = t->ep[e].bo.until_mono - mono + real;
        }
        rc = cb(&info, ctx);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void pfr_scrape_get_stats(pfr_scrape *s, pfr_scrape_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    pthread_mutex_unlock(&s->mu);
}
